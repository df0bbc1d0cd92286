"""The trial room, in the Tune trial's process: the function trainable (`trainable`), the light
function and report forwarder shipped to Ray Train (`train_fn`), and how results and pointer
checkpoints reach Tune (`bridge`). Kept free of heavy imports: Train's controller unpickles
`train_fn`."""
