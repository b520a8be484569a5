"""Adapters that put harness-one tools into agent frameworks, with every policy intact.

Each module imports its framework, so install the matching extra first:

=========================================  =====================  ===============================
module                                     extra                  gives
=========================================  =====================  ===============================
``harness_one.integrations.langchain``     ``langchain``          ``BaseTool`` for LangChain / LangGraph (and the reverse)
``harness_one.integrations.autogen``       ``autogen``            an AutoGen ``BaseTool``
``harness_one.integrations.openai_agents`` ``openai-agents``      an OpenAI Agents SDK ``FunctionTool``
``harness_one.integrations.pydantic_ai``   ``pydantic-ai``        a Pydantic AI ``Tool``
=========================================  =====================  ===============================

Every adapter calls through the registry, so validation (once, in the harness pipeline),
rate limits, timeouts, retries, idempotency and logging apply however the tool is reached.
Errors reach the agent as the harness's model-readable text.
"""
