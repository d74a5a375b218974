"""The commands, one module per area: auth (login, logout, whoami), the commands every
workload kind has (workloads; each kind's own are in :mod:`gangway_cli.kinds`) and misc
(queue, usage, completion). Importing a module registers its commands."""
