"""Advisor: pure functions of a Report that return findings, and snippet generators.

Never imports Qt or torch.
"""
