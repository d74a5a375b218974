"""Ray cluster requests: the model and its state machine, admission, provisioning, tasks."""
