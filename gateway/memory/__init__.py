"""The memory rules: records, the policy, the write gate, recall, injection, mining,
candidates, embeddings, tenancy, and the scenario evaluations.

Data flows identity -> recall -> inject -> forward (the HTTP layer) -> mine.
"""
