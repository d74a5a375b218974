"""Dynamic Resource Allocation (``resource.k8s.io/v1``) in kubesim.

``driver.py`` is the simulated NVIDIA DRA driver (DeviceClasses, one ResourceSlice per GPU
node, MIG partitions on shared counters); ``validation.py`` the API server's checks of the
four kinds; ``allocator.py`` the scheduler's structured-parameters allocator; and
``controller.py`` the resourceclaim controller and what the kubelet hands each container.
"""
