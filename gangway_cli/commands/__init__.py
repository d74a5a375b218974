"""The commands, one module per area: auth (login, logout, whoami), clusters, jobs and
misc (queue, usage, completion). Importing a module registers its commands."""
