"""C operator precedence, so printers parenthesise only where C (or a reader) needs it.

Printers build expressions bottom-up as `Code` values: the text plus the precedence of its
outermost operator. A child is wrapped in parentheses when C would otherwise parse it
differently, and also where C's rules are a known trap for readers: `&&` mixed with `||`,
bitwise and shift operators next to any other operator, and comparisons of comparisons.
"""
from __future__ import annotations

from dataclasses import dataclass

PRIMARY = 16        # names, literals, calls, a[i], (parenthesised)
UNARY = 15          # -x !x ~x (type)x
TERNARY = 3         # c ? a : b
LOWEST = 0          # a function argument or a whole statement expression: never wrapped

BINARY_PREC = {"*": 13, "/": 13, "%": 13, "+": 12, "-": 12, "<<": 11, ">>": 11,
               "<": 10, "<=": 10, ">": 10, ">=": 10, "==": 9, "!=": 9,
               "&": 8, "^": 7, "|": 6, "&&": 5, "||": 4}
_BITWISE = {"&", "^", "|", "<<", ">>"}
_LOGICAL = {"&&", "||"}
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}


@dataclass(frozen=True)
class Code:
    text: str
    prec: int = PRIMARY
    op: str = ""          # the outermost binary operator, if the expression is one

    def at(self, prec: int) -> str:
        """The text, parenthesised unless it binds at least as tightly as `prec`."""
        return self.text if self.prec >= prec else f"({self.text})"


def _for_clarity(parent: str, child: str) -> bool:
    if not child or child == parent:
        return False
    if parent in _LOGICAL and child in _LOGICAL:
        return True
    if parent in _BITWISE or child in _BITWISE:
        return True
    return parent in _COMPARE and child in _COMPARE


def binary(a: Code, op: str, b: Code) -> Code:
    """`a op b`; C's binary operators associate left, so a right operand at the same level
    keeps its parentheses (a - (b - c), and float a + (b + c) is a different sum)."""
    p = BINARY_PREC[op]
    left = f"({a.text})" if _for_clarity(op, a.op) else a.at(p)
    right = f"({b.text})" if _for_clarity(op, b.op) else b.at(p + 1)
    return Code(f"{left} {op} {right}", p, op)


def unary(op: str, x: Code) -> Code:
    """A prefix operator or a cast (`op` = "(type)")."""
    inner = x.at(UNARY)
    if op in ("-", "+") and inner.startswith(op):     # - -x, never the token --
        inner = f"({inner})"
    return Code(f"{op}{inner}", UNARY)


def select(c: Code, a: Code, b: Code) -> Code:
    """c ? a : b, with any nested ternary parenthesised (right-nested ?: is legal C but
    hard to read)."""
    return Code(f"{c.at(TERNARY + 1)} ? {a.at(TERNARY + 1)} : {b.at(TERNARY + 1)}", TERNARY)


def call(fn: str, *args: Code) -> Code:
    return Code(f"{fn}({', '.join(a.text for a in args)})")


def literal(text: str) -> Code:
    """A literal: negative ones bind like a unary minus (a - -1 needs no parentheses, but
    -1.0f as the operand of a cast or a unary operator does)."""
    return Code(text, UNARY if text.startswith("-") else PRIMARY)
