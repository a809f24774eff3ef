# zeus-source: examples/huggingface/README.md:28
# sha256: 24a073d5234acb8d6ce45a10b676a6b7c2fee2a307d60fb7a68d1ce4af54def7
# stand-ins: yes
# before: from transformers import Trainer; from zeus_core.compat.monitor import ZeusMonitor; from zeus_core.compat.optimizer.power_limit import HFGlobalPowerLimitOptimizer
# ---
    monitor = ZeusMonitor()
    optimizer = HFGlobalPowerLimitOptimizer(monitor)

    # Also works for SFTTrainer.
    trainer = Trainer(
        ...,
        callbacks=[optimizer], # Add the `HFGlobalPowerLimitOptimizer` callback
    )
