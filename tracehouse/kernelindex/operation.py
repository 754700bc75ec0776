"""§3 OperationSpec: the identity body and digest of a definition."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tracehouse.kernelindex.canonical import manifest_digest
from tracehouse.kernelindex.errors import IdentityError
from tracehouse.kernelindex.numbers import js_integer
from tracehouse.kernelindex.transformations import (
    argument_key,
    axis_key,
    check_identifier,
    check_manifest_texts,
    dimension,
    dtype_token,
    js_length,
    kebab,
)
from tracehouse.kernelindex.validation import validate_definition

_EXPRESSION_CHARS = re.compile(r"[a-z0-9_+\-*%/() ]*\Z")


FAMILY_SKIPPED_TAGS = frozenset({"L1", "L2", "Quant", "FlashInfer-Bench"})


def _family(definition: Mapping[str, Any]) -> str:
    op_type = definition.get("op_type")
    if isinstance(op_type, str) and op_type:
        family = kebab(op_type)
    else:
        family = "uncategorized"
        for tag in definition.get("tags") or ():
            if tag not in FAMILY_SKIPPED_TAGS and not tag.startswith("model:"):
                family = kebab(tag)
                break
    if not family:
        raise IdentityError("empty_family", "the operation family slug is empty")
    return family


def _argument_entry(name: str, argument: Mapping[str, Any]) -> dict[str, Any]:
    key = argument_key(name)
    check_identifier(key, "argument name")
    dtype = dtype_token(argument["dtype"])
    check_identifier(dtype, "dtype")
    shape = argument.get("shape")
    if not shape:
        # A 0-d tensor (shape null, absent or []) is a scalar (§3.1).
        return {"name": key, "scalar": {"dtype": dtype}}
    dims: list[int | str] = []
    for entry in shape:
        dim = dimension(entry)
        if isinstance(dim, str):
            check_identifier(dim, "symbolic dimension")
        elif dim < 0:
            raise IdentityError("invalid_shape", f"{name} has a negative dimension {dim}")
        dims.append(dim)
    return {"name": key, "tensor": {"shape": dims, "dtype": dtype}}


def operation_spec(definition: dict[str, Any]) -> dict[str, Any]:
    """The OperationSpec identity body of a definition (§3.1).

    Raises IdentityError for §2.3 field errors (KernelIndex skips the definition) and for
    manifest rule violations (KernelIndex aborts the import).
    """
    validate_definition(definition)
    check_manifest_texts(
        "operation", "definition", definition["name"], definition.get("description")
    )

    axes: dict[str, Any] = {}
    for axis_name, axis in definition["axes"].items():
        key = axis_key(axis_name)
        check_identifier(key, "axis key")
        kind = axis["type"]
        if kind == "const":
            if axis.get("value") is None:
                raise IdentityError("missing_const_value", f"const axis {axis_name!r} has no value")
            body: dict[str, Any] = {
                "role": "constant",
                "type": "integer",
                "value": js_integer(axis["value"], key),
            }
        elif kind == "var":
            body = {"role": "variable", "type": "integer"}
        else:
            expression = axis.get("expression")
            if not isinstance(expression, str):
                raise IdentityError(
                    "invalid_expression", f"derived axis {axis_name!r} has no expression"
                )
            expression = expression.lower()
            if js_length(expression) > 200 or not _EXPRESSION_CHARS.match(expression):
                raise IdentityError(
                    "invalid_expression", f"derived axis {axis_name!r}: {expression!r}"
                )
            body = {"role": "derived", "type": "integer", "expression": expression}
        # Two names that collide after lower-casing: the later one wins (§3.1).
        axes[key] = body

    inputs = [_argument_entry(n, a) for n, a in definition["inputs"].items()]
    outputs = [_argument_entry(n, a) for n, a in definition["outputs"].items()]
    if not inputs or not outputs:
        raise IdentityError(
            "missing_arguments", "a definition needs at least one input and one output"
        )
    spec: dict[str, Any] = {
        "family": _family(definition),
        "axes": axes,
        "inputs": inputs,
        "outputs": outputs,
        "semantics": {"mutation": "none", "determinism": "unspecified"},
    }
    reference = definition.get("reference")
    if isinstance(reference, str) and reference:
        spec["reference"] = {"language": "python"}
    return spec


def operation_digest(definition: dict[str, Any]) -> str:
    """Operation digest of a definition (§3); independent of its name, tags and description."""
    return manifest_digest("OperationSpec", operation_spec(definition))


operation_digest_of = operation_digest  # for functions whose parameter shadows the name
