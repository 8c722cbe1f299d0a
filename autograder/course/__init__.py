"""The course's release management: nbgrader's settings and stubs (`nbgrader_settings`,
`nbgrader_stubs`, `stubs`), the release (`release`), the students' tree (`student_release`,
`helpers`, `leaks`), which helpers a notebook may see (`staging`), the instructor's formgrader
(`formgrade`) and Colab (`colab`).

May import: model.
"""
