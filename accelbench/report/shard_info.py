"""What `accelbench data info` shows of a shard folder's index."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from accelbench.report.table import add_plain_row, plain_table


def shards_table(directory: Path, index: dict) -> Table:
    """Key facts of an index as a two-column table."""
    table = plain_table(f"token shards in {directory}", show_header=False)
    rows = {
        "source": index.get("source"),
        "tokenizer": index["tokenizer"]["name"],
        "identity": index["tokenizer"]["identity"],
        "vocab / eot": f"{index['tokenizer']['vocab_size']} / {index['tokenizer']['eot_id']}",
        "dtype": index["dtype"],
        "shards": f"{len(index['shards'])} of up to {index['shard_tokens']:,} tokens",
        "tokens": f"{index['total_tokens']:,}",
        "complete": "yes" if index["complete"] else "no (rerun prepare to resume)",
    }
    for key, value in rows.items():
        add_plain_row(table, key, value)
    return table
