import toolwire.models as models
from toolwire.models import messages


def test_public_names() -> None:
    expected = {
        "Model",
        "ModelResponse",
        "ModelSettings",
        "ModelError",
        "OpenAIChatModel",
        "ScriptedModel",
        "OfflineModel",
        "messages",
    }
    assert expected <= set(models.__all__)
    assert sorted(models.__all__, key=str.lower) == sorted(set(models.__all__), key=str.lower)
    for name in models.__all__:
        assert getattr(models, name) is not None
    assert models.messages is messages
