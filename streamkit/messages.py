"""Messages: Mastra's stored message model (``MastraDBMessage``) and the ``MessageList``.

The public face of three private modules, which depend on each other one way only:

* ``streamkit._message_model``: the message and part structs, their JSON form, turning loose
  input into messages, ``get_text``;
* ``streamkit._message_formats``: the provider ("core") and UI formats (``to_core``, ``to_ui``),
  built on the model;
* ``streamkit._message_list``: the ``MessageList`` of one request, built on both.

``from streamkit.messages import MessageList, Message, ...`` is the way in. Nothing is defined
here. What does not belong: chunks (``streamkit.chunks``), storage (``streamkit.memory``).

Example:
    >>> ml = MessageList(Message.user("Who is customer C-42?"))
    >>> get_text(ml.get.all.db()[0])
    'Who is customer C-42?'
"""

from __future__ import annotations

from streamkit._message_formats import to_core, to_ui
from streamkit._message_list import (
                                     MessageList,
                                     MessageListCheckpoint,
                                     MessageView,
                                     Source,
                                     SystemSnapshot,
)
from streamkit._message_model import (
                                     DataPart,
                                     ErrorPart,
                                     FilePart,
                                     ImagePart,
                                     Message,
                                     MessageContent,
                                     MessageEncoder,
                                     Part,
                                     ReasoningPart,
                                     ReasoningText,
                                     RedactedReasoning,
                                     Role,
                                     SourceDocumentPart,
                                     SourceInfo,
                                     SourcePart,
                                     StepStartPart,
                                     TextPart,
                                     ToolApproval,
                                     ToolInvocation,
                                     ToolInvocationPart,
                                     ToolState,
                                     decode_message,
                                     decode_messages,
                                     format_timestamp,
                                     get_text,
                                     message_encoder,
                                     message_from_dict,
                                     message_to_dict,
                                     to_message,
                                     to_messages,
                                     to_part,
)
from streamkit._prompt import (
    AssistantContent,
    AssistantPromptMessage,
    FileContent,
    ImageContent,
    PromptMessage,
    ReasoningContent,
    RedactedReasoningContent,
    SystemPromptMessage,
    TextContent,
    ToolCallContent,
    ToolPromptMessage,
    ToolResultContent,
    UserContent,
    UserPromptMessage,
    prompt_text,
)

__all__ = [
    # the model
    "Role", "ToolState", "Message", "MessageContent", "Part", "TextPart", "ReasoningPart",
    "ReasoningText", "RedactedReasoning", "ToolInvocationPart", "ToolInvocation", "ToolApproval",
    "FilePart", "ImagePart", "SourcePart", "SourceInfo", "SourceDocumentPart", "StepStartPart",
    "ErrorPart", "DataPart",
    # JSON
    "MessageEncoder", "message_encoder", "decode_message", "decode_messages", "message_to_dict",
    "message_from_dict", "format_timestamp",
    # loose input, text, formats
    "to_part", "to_message", "to_messages", "get_text", "to_core", "to_ui",
    # the prompt a model gets (typed provider-shaped messages)
    "PromptMessage", "SystemPromptMessage", "UserPromptMessage", "AssistantPromptMessage",
    "ToolPromptMessage", "TextContent", "FileContent", "ImageContent", "ReasoningContent",
    "RedactedReasoningContent", "ToolCallContent", "ToolResultContent", "UserContent",
    "AssistantContent", "prompt_text",
    # the list
    "MessageList", "MessageView", "MessageListCheckpoint", "SystemSnapshot", "Source",
]
