"""The bottom floor's request accounting, shared by the framework and the store backends alike:
what a request cost the stores (`usage`) and a store's refusal of the client's own write
(`refusal`). Kept below both so that neither imports the other."""
