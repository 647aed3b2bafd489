"""Text laid out otherwise than protobuf's printers write it, laid out so again, token by token.

The chunk reader (:mod:`memtrace.read.text_chunks`) reads the layout every protobuf printer
writes: one field per line, ``name {`` and ``}`` around a message, two spaces a level. protobuf's
parser takes much more: any blanks and comments between tokens, several fields or a whole file
on one line, ``<...>`` around a message, ``[a, b]`` for the values of a repeated field, a string
written in adjacent parts (``"a" "b"``), a ``,`` or ``;`` after a field. :class:`Layout` writes
such text again as the printers would, keeping every token as it is, so that protobuf reads the
same message from either text: a list becomes one field per value (as long as the field is
repeated: it follows the schema), ``<`` and ``>`` stay (the chunk reader takes them on lines of
their own and checks that they pair), and a string's parts stay together on their line.

It is fed either a whole chunk (:func:`canonical_layout`, where the reader cannot classify one)
or, where the text has no line to cut it at, the text itself, a piece at a time
(:meth:`Layout.feed`): it then holds back whatever the next piece may continue (a token, a
comment) and says where its own lines can be cut (before a ``node_stats``, after a top-level
message), so that such text still streams in chunks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .detect import Unrecognised
from .text_schema import CHILDREN, DELEG, NODE, OLD_NAMES, REPEATED_FIELDS, SINGULAR_CHILDREN, SKIP

# protobuf's text tokens as this reader takes them, each after the blanks and comments before it
# (possessive, so that neither can be split into a token): a quoted string, a name or a scalar, a
# mark of structure (`{`, `<`, `[`, `,`, ...), or any other character, which is never valid.
TOKEN = re.compile(rb"""(?:[ \t\r\n\f\v]++|\#[^\n]*+)*+("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'"""
                   rb"""|[^ \t\r\n\f\v{}:#"'\[\]<>,;]+|[{}:]|[^ \t\r\n\f\v#])""")
_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
_END = b"\n\0"  # after the text, a token of its own: see _tokens
_LONG_LINE_BYTES = 1 << 16  # a line left open this long is laid out by findall (see Layout._lay_out_line_start)


def _tokens(text: bytes, end: int) -> list[bytes]:
    """The tokens of ``text[:end]``.

    Where a match fails (blanks and comments with no token after them, at the end), findall would
    search on from the next byte, inside the comment; a last token of its own after a line end
    keeps every match starting where the one before ended.
    """
    tokens = TOKEN.findall((text if end == len(text) else text[:end]) + _END)
    tokens.pop()  # the \0
    return tokens


_INDENTS = [b"  " * level for level in range(64)]
_MARKS = b"{}:[]<>,;\"'"  # what a scalar value never begins with (a string begins with a quote)
_QUOTES = b"\"'"

_CHILD_KIND = {(kind, name.encode()): child for kind, table in CHILDREN.items() for name, child in table.items()}
_REPEATED_CHILDREN = {key for key in _CHILD_KIND if (key[0], key[1].decode()) not in SINGULAR_CHILDREN}
_REPEATED_SCALARS = {(kind, name.encode()) for kind, name in REPEATED_FIELDS} | {
    (kind, old.encode()) for (kind, old), name in OLD_NAMES.items() if (kind, name) in REPEATED_FIELDS}

# What the layout expects next.
(_FIELD,  # a field's name, a message's end, after a field a ',' or ';', after a string another part
 _COLON,  # after a name: ':', or a message's '{' / '<', or a list's '['
 _VALUE,  # after 'name:': a value, a message, or a list
 _FIRST_ITEM,  # after '[': the first item, or ']'
 _NEXT_ITEM,  # after an item: ',' or ']' (after a string item, another part)
 _ITEM,  # after ',': an item
 _AS_IT_IS,  # inside a list in a delegated field: its tokens, kept as they are up to its ']'
 ) = range(7)


class Layout:
    """Tokens laid out one field per line, two spaces a level, from inside the messages ``kinds``.

    ``root`` is the file's message type (``SS`` or ``RM``); ``kinds`` are the types of the messages
    open where the text begins, outermost first. Lines accumulate in :attr:`lines`.
    """

    def __init__(self, root: int, kinds: Sequence[int], starts_at_node: bool = False):
        self.root = root
        self.kinds = list(kinds)  # the open messages' types, outermost first
        self.items_of: list[bytes | None] = [None] * len(self.kinds)  # per open message: the list it is an item of
        self.expect = _FIELD
        self.name = b""  # the field whose value comes next (in a list: the list's field)
        self.item_kind = -1  # in a list: its messages' type; -1 for a list of scalars
        self.separator = False  # a ',' or ';' may end the field just written
        self.string_line = False  # the last line ends in a string another part may continue
        self.as_it_is: list[bytes] = []  # a delegated field's list so far (see _AS_IT_IS)
        self.as_it_is_depth = 0
        self.lines: list[bytes] = []
        # Where the lines may be cut: before a node, after a top-level message (feed's callers).
        self.cut_line = 0
        self.cut_at_node = False
        self.starts_at_node = starts_at_node  # whether the lines not yet taken begin at a node
        self.held = b""  # the start of a token the next piece may continue
        self.in_comment = False  # the last piece ended inside a comment

    # -- tokens -----------------------------------------------------------------------------

    def lay_out(self, tokens: list[bytes]) -> None:
        """Lay out complete tokens (the state carries over to the next call).

        The state is kept in local names while the tokens are walked (this loop is what a chunk laid
        out again costs); the helpers for the rarer tokens leave ``separator`` and ``string_line`` to it.
        """
        lines, kinds, items_of = self.lines, self.kinds, self.items_of
        append = lines.append
        is_name = _NAME.fullmatch
        child_kind = _CHILD_KIND.get
        expect, name, separator, string_line = self.expect, self.name, self.separator, self.string_line
        # (module constants as local names: each global costs a dictionary lookup in this loop)
        field, colon, value, next_item, item, first_item = _FIELD, _COLON, _VALUE, _NEXT_ITEM, _ITEM, _FIRST_ITEM
        marks, quotes, indents, node, skip, deleg = _MARKS, _QUOTES, _INDENTS, NODE, SKIP, DELEG
        indent = indents[len(kinds)] if len(kinds) < len(indents) else b""
        try:
            for token in tokens:
                if expect == field:
                    if token == b"}" or token == b">":
                        if kinds and items_of[-1] is None:  # (as _close, for the common case)
                            kinds.pop()
                            items_of.pop()
                            indent = indents[len(kinds)]
                            append(indent + token)
                            if not kinds:
                                self.cut_line, self.cut_at_node = len(lines), False
                        else:
                            expect, name = self._close(token)
                            indent = indents[len(kinds)]
                        separator, string_line = expect == field, False
                    elif is_name(token):
                        name, expect = token, colon
                    elif separator and (token == b"," or token == b";"):
                        separator = string_line = False
                    elif string_line and token[0] in quotes and len(token) > 1:
                        lines[-1] += b" " + token
                    else:
                        raise Unrecognised("text this reader cannot lay out")
                elif expect == colon:
                    if token == b":":
                        expect = value
                    elif token == b"{" or token == b"<":  # (as _open, for the common case)
                        parent = kinds[-1] if kinds else self.root
                        kind = skip if parent >= deleg else child_kind((parent, name), -1)  # (DELEG and SKIP come last)
                        if kind < 0:
                            raise Unrecognised("a message field this reader does not know")
                        if kind == node:
                            self.cut_line, self.cut_at_node = len(lines), True
                        append(indent + name + b" " + token)
                        kinds.append(kind)
                        items_of.append(None)
                        indent = indents[len(kinds)]
                        expect = field
                        separator = string_line = False
                    elif token == b"[":
                        expect = self._list(name, colon=False)
                        string_line = False
                    else:
                        raise Unrecognised("text this reader cannot lay out")
                elif expect == value:
                    first = token[0]
                    if first not in marks:
                        append(indent + name + b": " + token)
                        expect, separator, string_line = field, True, False
                    elif first in quotes and len(token) > 1:
                        append(indent + name + b": " + token)
                        expect, separator, string_line = field, True, True
                    elif token == b"{" or token == b"<":
                        expect = self._open(name, token, None)
                        indent = indents[len(kinds)]
                        separator = string_line = False
                    elif token == b"[":
                        expect = self._list(name, colon=True)
                        string_line = False
                    else:
                        raise Unrecognised("text this reader cannot lay out")
                elif expect == next_item:
                    if token == b",":
                        expect, string_line = item, False
                    elif token == b"]":
                        expect, separator, string_line = field, True, False
                    elif string_line and token[0] in quotes and len(token) > 1:
                        lines[-1] += b" " + token
                    else:
                        raise Unrecognised("text this reader cannot lay out")
                elif expect == item or expect == first_item:
                    if expect == first_item and token == b"]":
                        expect, separator = field, True
                    elif self.item_kind >= 0:  # a list of messages
                        if token != b"{" and token != b"<":
                            raise Unrecognised("a list item that is not a message")
                        expect = self._open(name, token, name)
                        indent = indents[len(kinds)]
                        separator = string_line = False
                    else:
                        first = token[0]
                        if first in marks and not (first in quotes and len(token) > 1):
                            raise Unrecognised("a list item that is not a value")
                        append(indent + name + b": " + token)
                        expect, string_line = next_item, first in quotes
                else:
                    expect = self._as_it_is(name, token)
                    if expect == field:
                        separator, string_line = True, False
        except IndexError:  # nesting no trace has
            raise Unrecognised("text this reader cannot lay out") from None
        self.expect, self.name, self.separator, self.string_line = expect, name, separator, string_line

    def _open(self, name: bytes, opener: bytes, item_of: bytes | None) -> int:
        """A message opens (``name {`` or ``name <``), an item of the list ``item_of`` or not."""
        kinds = self.kinds
        parent = kinds[-1] if kinds else self.root
        if parent == DELEG or parent == SKIP:
            kind = SKIP
        else:
            found = _CHILD_KIND.get((parent, name))
            if found is None:
                raise Unrecognised("a message field this reader does not know")
            kind = found
            if kind == NODE:
                self.cut_line, self.cut_at_node = len(self.lines), True
        self.lines.append(_INDENTS[len(kinds)] + name + b" " + opener)
        kinds.append(kind)
        self.items_of.append(item_of)
        return _FIELD

    def _close(self, closer: bytes) -> tuple[int, bytes]:
        """A message ends; what comes next is another field, or, after a list item, ',' or ']'."""
        if not self.kinds:
            raise Unrecognised("more closing braces than opening ones")
        kind = self.kinds.pop()
        item_of = self.items_of.pop()
        self.lines.append(_INDENTS[len(self.kinds)] + closer)
        if not self.kinds:
            self.cut_line, self.cut_at_node = len(self.lines), False
        if item_of is not None:
            self.item_kind = kind
            return _NEXT_ITEM, item_of
        return _FIELD, b""

    def _list(self, name: bytes, colon: bool) -> int:
        """``name: [`` (or ``name [`` for messages): the items are laid out as fields of their own."""
        parent = self.kinds[-1] if self.kinds else self.root
        if parent == DELEG or parent == SKIP:
            if not colon:  # ('name [' takes messages only, and which fields are messages is protobuf's to say)
                raise Unrecognised("a list in a delegated field without ':'")
            self.as_it_is, self.as_it_is_depth = [b"["], 1
            return _AS_IT_IS
        if (parent, name) in _REPEATED_CHILDREN:
            self.item_kind = _CHILD_KIND[(parent, name)]
        elif colon and (parent, name) in _REPEATED_SCALARS:
            self.item_kind = -1
        else:
            raise Unrecognised("list syntax for a field that is not repeated")
        return _FIRST_ITEM

    def _as_it_is(self, name: bytes, token: bytes) -> int:
        """A token of a list inside a delegated field (a graph), which protobuf parses: the list is
        written on one line as it is, since only protobuf knows which of its fields repeat."""
        self.as_it_is.append(token)
        if token == b"[" or token == b"{" or token == b"<":
            self.as_it_is_depth += 1
        elif token == b"]" or token == b"}" or token == b">":
            self.as_it_is_depth -= 1
            if not self.as_it_is_depth:
                if token != b"]":
                    raise Unrecognised("a list closed by another delimiter")
                self.lines.append(_INDENTS[len(self.kinds)] + name + b": " + b" ".join(self.as_it_is))
                self.as_it_is = []
                return _FIELD
        return _AS_IT_IS

    def at_rest(self, kinds: Sequence[int]) -> bool:
        """Whether every token so far is laid out, the messages open are of types ``kinds``, none of
        them a list item, and the next token begins a field: where the text's own lines can be cut again."""
        return (self.expect == _FIELD and not self.held and not self.in_comment and self.kinds == list(kinds)
                and not any(self.items_of))

    # -- text a piece at a time ---------------------------------------------------------------

    def feed(self, text: bytes) -> None:
        """Lay out the next piece of text: its complete tokens; what the next may continue is held back.

        A token never spans lines, so every line the piece ends is laid out whole; of a line it
        leaves open, the tokens before the last (and before a quote the piece may cut off).
        """
        if self.in_comment:  # a comment that began in an earlier piece runs to the end of its line
            end = text.find(b"\n")
            if end < 0:
                return
            text, self.in_comment = text[end + 1:], False
        if self.held:
            text = self.held + text
        lines_end = text.rfind(b"\n") + 1
        if lines_end:
            self.lay_out(_tokens(text, lines_end))
        if len(text) - lines_end > _LONG_LINE_BYTES and self._lay_out_line_start(text, lines_end):
            return
        tokens: list[bytes] = []
        hold = len(text)
        end = lines_end
        for match in TOKEN.finditer(text, lines_end):
            if match.start() != end:  # no token after ``end``: blanks, and perhaps a comment (see _tokens)
                break
            token = match.group(1)
            if match.end() == len(text) or token == b'"' or token == b"'":
                hold = match.start(1)
                break
            tokens.append(token)
            end = match.end()
        if hold == len(text):
            self.in_comment = text.find(b"#", end) >= 0
        self.lay_out(tokens)
        self.held = text[hold:]

    def _lay_out_line_start(self, text: bytes, start: int) -> bool:
        """Lay out a long line left open (text on one line) up to its last '}', with findall rather
        than a match at a time; False where that cannot be known to end outside a string or comment.

        Without a '#' on the line there is no comment; a '}' inside a string would leave that
        string open where the tokens end, and an open string is a lone quote among them.
        """
        end = text.rfind(b"}", start) + 1
        if not end or text.find(b"#", start) >= 0:
            return False
        tokens = _tokens(text[start:end], end - start)
        if b'"' in tokens or b"'" in tokens:
            return False
        self.lay_out(tokens)
        self.held = text[end:]
        return True

    def take(self, upto: int | None = None) -> tuple[bytes, bool] | None:
        """The lines laid out up to the last place to cut them (or ``upto``), as a chunk, and whether
        it begins at a node; None where there is nothing to take."""
        cut = self.cut_line if upto is None else upto
        if not cut:
            return None
        chunk = b"\n".join(self.lines[:cut]) + b"\n"
        del self.lines[:cut]
        starts_at_node, self.starts_at_node = self.starts_at_node, self.cut_at_node
        self.cut_line = 0
        return chunk, starts_at_node

    def take_all(self) -> tuple[bytes, bool] | None:
        """Every line laid out so far, as a chunk (see :meth:`take`)."""
        return self.take(len(self.lines))

    def end(self) -> None:
        """The text has ended: whatever was held back is complete; no field may be left half written."""
        self.feed(b"\n")
        if self.expect != _FIELD:
            raise Unrecognised("a field cut off at the end of the text")


def canonical_layout(buffer: bytes, root: int, kinds: Sequence[int]) -> bytes:
    """A chunk's text laid out as protobuf's printers write it, from inside the open messages ``kinds``.

    The tokens stay as they are, so protobuf reads the same message from either text; text this
    cannot lay out (an extension, a list of a field that does not repeat, a stray mark) is
    Unrecognised.
    """
    layout = Layout(root, kinds)
    layout.lay_out(_tokens(buffer, len(buffer)))
    if layout.expect != _FIELD:
        raise Unrecognised("a field cut off at the end of a chunk")
    layout.lines.append(b"")
    return b"\n".join(layout.lines)
