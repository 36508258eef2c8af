"""The row changes every source produces and the apply stage consumes (docs/architecture.md "The row-change
contract"): the contract (`contract.RowChanges`), the collapse rule all sources share (`collapse`: the last
change per key, net copies of a multiset), and the collapse of changes that arrive already typed (`typed`:
TiCDC's storage sink and Kafka topics). Sources import this package; it imports no source and no apply
step, so data flows one way: sources -> changes -> apply -> Delta.
"""
