"""The worker: one notebook of one student, stage by stage. Rebuild onto the master (`rebuild`),
execute in a jailed kernel (`execute`), probe the answers beside it (`sandbox`, `context`,
`provenance`), judge them (`judge`); `pipeline` runs the stages for a `task`.

May import: model, checks, probe, course, jail, intake, publish (the feedback page a worker writes).
"""
