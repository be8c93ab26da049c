"""One module per rule type; each defines its class, which carries everything about the type.

Every module of this package is imported here, in name order, and its class registers itself (see
``seqjudge.rules.base.RuleBase``): adding a rule type is adding a module, with nothing to list elsewhere.
The module holds a ``RuleBase`` subclass (with ``SameMixin`` first when it takes ``same:``) declaring
``type: Literal["name"]``, its fields and validators, ``rank``, ``operand_fields``/``operand_list_fields``,
and ``default_id``, ``describe``, ``requirement``, ``ordering`` and ``compile``, plus the evaluator
``compile`` returns (a function of the rule, its compiled selectors and a ``View``, returning a
``Finding``). A piece left out is a ``TypeError`` when the module is imported. Then tests, and the README's
rule list.
"""

from __future__ import annotations

import importlib
import pkgutil

from seqjudge.rules.base import RuleBase, rule_classes

__all__ = ["load_rule_types"]


def load_rule_types() -> dict[str, type[RuleBase]]:
    """Every rule type, by name, in listing order (importing each module of this package once)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{info.name}")
    return rule_classes()
