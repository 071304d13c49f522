"""How a page words a refusal (state/page.py user_message)."""

from backend.errors import FieldError, InvalidInput
from state.page import user_message


def test_a_lone_name_problem_drops_the_field_and_several_keep_each_field():
    assert user_message(InvalidInput([FieldError("name", "must not be empty")])) == "must not be empty"
    several = InvalidInput([FieldError("name", "must be lower-case"), FieldError("url", "must be http or https")])
    assert user_message(several) == "name: must be lower-case; url: must be http or https"
