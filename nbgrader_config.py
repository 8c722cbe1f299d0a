"""nbgrader reads this file from the project root; the settings live in the autograder package."""

from autograder.course.nbgrader_settings import configure_instructor

configure_instructor(get_config())  # noqa: F821 - nbgrader provides get_config
