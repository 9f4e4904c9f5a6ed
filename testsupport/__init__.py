"""What the tests, the demo and the benchmarks share and that is not itself a test.

Tests import it with the checkout's root on ``sys.path`` (pytest's ``pythonpath = ["."]``);
the scripts under scripts/ put the root there themselves. It is not installed with the
migrator.

The emulator and its moto extensions:
    emulator                   moto's server over HTTP as a subprocess (``EmulatorProcess``), its
                               ``--auth`` mode, ``free_port``; ``python -m testsupport.emulator``
    moto_kinesis_destination   DynamoDB's Kinesis streaming destination
    moto_kinesis_resharding    Kinesis splits and merges routed as AWS does
    moto_kinesis_retention     a shard's trim horizon (``trim_shard``), MillisBehindLatest as AWS
    moto_stream_reenable       a table's stream disabled, then enabled again as a new stream
    moto_stream_binary_keys    a stream record's Keys hold a binary key as the item does
    moto_scan_binary_segments  a parallel Scan of a table whose hash key is binary
    moto_scan_pages            a Scan page read from the start key, not by walking the whole table
    moto_dynamodb_plain_json   item-carrying DynamoDB answers written as plain JSON, as moto 5.1 did
    moto_table_lock            one lock around moto's DynamoDB item operations

Servers a test runs on loopback:
    loopback                   the threaded keep-alive HTTP service the servers below build on
    faultproxy                 a fault-injecting, request-recording proxy in front of the emulator
    streamserver               a scripted DynamoDB Streams API (splits, trims, expired iterators)
    alternator_cluster         local nodes standing for an Alternator cluster: /localnodes, Alternator's answers

Data:
    sample_data                deterministic items of every type; the sample table; ``seed``
    all_types                  every DynamoDB type (tests/fixtures/all_types_items.json), comparisons
    s3_exports                 S3 exports written in AWS's layout and formats; an S3 access log

Running the migrator from a test:
    endpoint                   the test endpoint's region and keys, clients, config blocks, table reads
    jobs                       config files, runs in process, as a process or under spark-submit, output,
                               the metrics endpoint scraped
    ports                      a closed loopback port, a busy one
    resume                     an interrupted snapshot copy or validation: units recorded, segments scanned
    planted                    two tables with a difference of every kind, and the validator's expected samples
    replication                live changes (Streams mode), convergence, a checkpoint aged by hours
    kinesis_runs               Kinesis-mode runs in process: a stream, changes, a should_stop
    export_imports             configs importing an S3 export
    export_writes              configs writing a table as an S3 export, and checking what was written
    hdfs                       HDFS on the local disk

The convergence soak (scripts/soak.py, tests/integration/test_soak.py, docs/soak.md):
    soak                       a round: plan from a seed, runs interrupted at moments, the verdict
    soak_data                  random key schemas, items of every shape, the source writer
    convergence                the target against the source: lost, resurrected, altered keys
"""
