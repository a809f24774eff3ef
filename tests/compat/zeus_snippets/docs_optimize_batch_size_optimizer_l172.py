# zeus-source: docs/optimize/batch_size_optimizer.md:172
# sha256: 8bbee9358b62533fb39a1dfd2c3c89525949bcdeb600e0734deca56755cf1611
# stand-ins: yes
# bso-server: bso-server:8000
# check: trial 1: batch size 256
# ---
from zeus_core.compat.monitor import ZeusMonitor
from zeus_core.compat.optimizer.batch_size import BatchSizeOptimizer, JobSpec

monitor = ZeusMonitor()

# On instantiation, the BSO will register the job to the BSO server
bso = BatchSizeOptimizer(
    monitor=monitor,
    server_url="http://bso-server:8000",
    job=JobSpec(
        job_id=os.environ.get("ZEUS_JOB_ID"),
        job_id_prefix="mnist",
        default_batch_size=256,
        batch_sizes=[32, 64, 256, 512, 1024, 4096, 2048],
        max_epochs=100
    ),
)

# Get batch size to use from the server
batch_size = bso.get_batch_size()

train_dataloader = DataLoader(train_dataset, batch_size=batch_size, shuffle=True)
eval_dataloader = DataLoader(eval_dataset, batch_size=batch_size)

# Start measuring the time and energy consumption of this training run
bso.on_train_begin()

for epoch in range(100):
    for batch in train_dataloader:
        # Training loop
        pass

    # The BSO server needs to know whether training has converged
    metric = evaluate(model, eval_dataloader)
    bso.on_evaluate(metric)

    # The BSO server will determine whether to stop training
    if bso.training_finished:
        break
