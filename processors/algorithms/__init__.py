"""The bottom floor: bus-free, store-free algorithms that stores, ingest and retrieval all import
(and which import none of them): text matching, BM25, fusion, vectors, edge scoring, entity
ranking, passage ranking, PageRank, BFS, IRIs."""
