"""toolwire: a tool-calling runtime and OpenAI-compatible gateway for LLM assistants.

```python
import toolwire

@toolwire.tool
def get_weather(city: str) -> dict[str, object]:
    \"\"\"Current weather in a city.\"\"\"
    ...

agent = toolwire.Agent(toolwire.OfflineModel(), [get_weather])
result = await agent.run("What's the weather in Lisbon?")
```
"""

from toolwire.agent import (
    Agent,
    AgentEvent,
    ApprovalDecision,
    ApprovalRequired,
    Done,
    PendingApproval,
    ReasoningDelta,
    RunConflict,
    RunResult,
    RunState,
    RunStatus,
    Step,
    TextDelta,
    ToolCallResult,
    ToolCallStart,
)
from toolwire.models import (
    AnthropicModel,
    AssistantMessage,
    Message,
    Model,
    ModelError,
    ModelResponse,
    ModelSettings,
    OfflineModel,
    OpenAIChatModel,
    ParsingModel,
    PromptedModel,
    ScriptedModel,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from toolwire.runner import Approver, Policy, ToolRunner
from toolwire.tools import (
    HttpTools,
    McpTools,
    MockToolProvider,
    MockTools,
    Tool,
    ToolArguments,
    Toolbox,
    ToolCall,
    ToolContext,
    ToolDefinitionError,
    ToolError,
    ToolErrorInfo,
    ToolExecutionError,
    ToolNotFoundError,
    ToolParameter,
    ToolParameterError,
    ToolProvider,
    ToolProviderProtocol,
    ToolResult,
    tool,
)

__version__ = "0.1.0"

__all__ = [  # noqa: RUF022 -- grouped by topic, not sorted
    # Tools: definitions, calls and results
    "HttpTools",
    "McpTools",
    "MockToolProvider",
    "MockTools",
    "Tool",
    "ToolArguments",
    "ToolCall",
    "ToolContext",
    "ToolErrorInfo",
    "ToolParameter",
    "ToolProvider",
    "ToolProviderProtocol",
    "ToolResult",
    "Toolbox",
    "tool",
    # Errors
    "ModelError",
    "ToolDefinitionError",
    "ToolError",
    "ToolExecutionError",
    "ToolNotFoundError",
    "ToolParameterError",
    # Running tools
    "Approver",
    "Policy",
    "ToolRunner",
    # The agent loop and its events
    "Agent",
    "AgentEvent",
    "ApprovalDecision",
    "ApprovalRequired",
    "Done",
    "PendingApproval",
    "ReasoningDelta",
    "RunConflict",
    "RunResult",
    "RunState",
    "RunStatus",
    "Step",
    "TextDelta",
    "ToolCallResult",
    "ToolCallStart",
    # Models and the conversation
    "AnthropicModel",
    "AssistantMessage",
    "Message",
    "Model",
    "ModelResponse",
    "ModelSettings",
    "OfflineModel",
    "OpenAIChatModel",
    "ParsingModel",
    "PromptedModel",
    "ScriptedModel",
    "SystemMessage",
    "ToolMessage",
    "Usage",
    "UserMessage",
    # Package metadata
    "__version__",
]
