# zeus-source: docs/measure/index.md:399
# sha256: b795fd034c4a1ea571b41c2f1f1157d2c5b0752662a42efadeca0e6bcbe582d0
# stand-ins: yes
# services: pushgateway
# check: Epoch 99 completed ;; \[pushgateway\] [1-9]\d* pushes
# ---
from zeus_core.compat.metric import PowerGauge

if __name__ == "__main__":
    power_gauge_metric = PowerGauge(
        gpu_indices=[0], 
        update_period=2,  
        prometheus_url='http://localhost:9091',
        job='power_gauge_job'
    )
    train_loader = range(10) 
    val_loader = range(5)  

    power_gauge_metric.begin_window("training_power")

    for epoch in range(100):  
        print(f"\n--- Epoch {epoch} ---")
        train_one_epoch(train_loader, model, optimizer, criterion, epoch, args)
        acc1 = validate(val_loader, model, criterion, args)
        print(f"Epoch {epoch} completed. Validation Accuracy: {acc1:.2f}%.")

    power_gauge_metric.end_window("training_power")
