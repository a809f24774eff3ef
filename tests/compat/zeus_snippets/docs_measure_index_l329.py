# zeus-source: docs/measure/index.md:329
# sha256: 36f99b31c48451cd4d5c33d7726fc99cc4e09794cd24dbb03c2fc650dad969ff
# stand-ins: yes
# services: pushgateway
# rapl: fake
# check: Epoch 99 completed ;; \[pushgateway\] 100 pushes
# ---
from zeus_core.compat.metric import EnergyHistogram

if __name__ == "__main__":
    energy_histogram = EnergyHistogram(
        cpu_indices=[0], 
        gpu_indices=[0], 
        prometheus_url='http://localhost:9091', 
        job='training_energy_histogram'
    )

    for epoch in range(100):
        energy_histogram.begin_window("epoch_energy")
        train_one_epoch(train_loader, model, optimizer, criterion, epoch, args)
        acc1 = validate(val_loader, model, criterion, args)
        energy_histogram.end_window("epoch_energy")
        print(f"Epoch {epoch} completed. Validation Accuracy: {acc1}%")

