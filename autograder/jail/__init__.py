"""The jail: bubblewrap around student code (`jail`), its cgroup (`cgroup`) and its seccomp filter
(`seccomp`). The trust boundary: nothing here runs student code itself.

May import: model, course (which helpers a jail hides), probe (the folder it mounts).
"""
