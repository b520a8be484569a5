"""Adapters that put harness-one tools into agent frameworks, with every policy intact.

Each module imports its framework, so install the matching extra first:

============================================  =====================  ===============================
module                                        extra                  gives
============================================  =====================  ===============================
``harness_one.integrations.langchain``        ``langchain``          a LangChain ``StructuredTool`` (LangChain / LangGraph), and the reverse
``harness_one.integrations.openai_agents``    ``openai-agents``      an OpenAI Agents SDK ``FunctionTool``
``harness_one.integrations.pydantic_ai``      ``pydantic-ai``        a Pydantic AI ``Tool``
``harness_one.integrations.agent_framework``  ``agent-framework``    a Microsoft Agent Framework ``FunctionTool``
``harness_one.integrations.autogen``          ``autogen``            an AutoGen ``BaseTool`` (AutoGen is archived upstream)
============================================  =====================  ===============================

Every adapter has ``to_<framework>(tool, registry=None, *, context=None)`` and
``as_<framework>_tools(tools=None, registry=None, *, context=None)``. A tool is its name, its
``Tool`` or its ``@defineTool`` function; with no ``tools``, the registry's tools defined in
code (installed ones must be named). The provider's tool-call id becomes the harness call id,
and ``context=`` (a mapping, or a function of the framework's run context) becomes
``Call.context``. ``name=`` / ``names=`` set the name the framework shows the model (such as
``harness_one.export.gemini_name`` for Gemini), while the registry is called by the tool's own. Every call goes through the registry, so validation (once, in the harness
pipeline), rate limits, timeouts, retries and logging apply however the tool is reached.
Idempotency needs an ``idempotency_key``, which no adapter passes: a call id is not one.
Errors reach the agent as the harness's model-readable text, naming the tool as the framework shows it.
"""
