"""Adapters that plug kvblk into serving stacks.

Each submodule is self-contained and imports nothing from the stack it
serves: ``kvblk.integrations.lmcache`` implements LMCache's native
connector contract by duck typing.
"""
