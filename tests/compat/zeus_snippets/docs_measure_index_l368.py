# zeus-source: docs/measure/index.md:368
# sha256: 4a40cc099d91750a23ed458c8f4dca2d0af5e76c2a0997836724ae0ba9f68d50
# stand-ins: yes
# services: pushgateway
# rapl: fake
# check: Epoch 99 completed ;; \[pushgateway\] [1-9]\d* pushes
# ---
from zeus_core.compat.metric import EnergyCumulativeCounter

if __name__ == "__main__":
    cumulative_counter_metric = EnergyCumulativeCounter(
        cpu_indices=[0], 
        gpu_indices=[0], 
        update_period=2,  
        prometheus_url='http://localhost:9091',
        job='energy_counter_job'
    )
    train_loader = range(10) 
    val_loader = range(5)  

    cumulative_counter_metric.begin_window("training_energy")

    for epoch in range(100):  
        print(f"\n--- Epoch {epoch} ---")
        train_one_epoch(train_loader, model, optimizer, criterion, epoch, args)
        acc1 = validate(val_loader, model, criterion, args)
        print(f"Epoch {epoch} completed. Validation Accuracy: {acc1:.2f}%.")

    cumulative_counter_metric.end_window("training_energy")
