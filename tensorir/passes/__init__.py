"""Loop-IR passes: simplification of index arithmetic and explicit unrolling."""
