"""Parts of the LLM code generator: prompts, the answer contract, retries, accounting.

The generator itself is :mod:`kernelpro.generate.anthropic_gen`; these modules hold no
SDK state and are tested on their own.
"""
