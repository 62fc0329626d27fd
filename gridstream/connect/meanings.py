"""What each connector option means, by its snake_case name (``grid.x``/``converter.x``
where a grid's or a converter's option differs): the meanings of the seed's options,
kept beside their config models and rendered by ``gridstream.options_doc``."""

from __future__ import annotations

__all__ = ["MEANINGS"]

MEANINGS: dict[str, str] = {
    # both kinds
    "name": "The connector's name, unique among the run's pipelines and connectors "
            "(letters, digits, `_.-`, at most 100). Names it in progress lines, errors "
            "and dead-letter headers.",
    "kind": "`source` (grid caches → Kafka) or `sink` (Kafka → grid caches). "
            "`connector.class` = `gridstream.connect.GridSourceConnector` / "
            "`GridSinkConnector` says the same.",
    "grid": "The grid: a table, see [Grid settings](#grid-settings).",
    "checkpoint": "The Spark checkpoint directory (offsets, positions, snapshot files). "
                  "One per connector or pipeline; a restarted connector resumes from it.",
    "bootstrap_servers": "Kafka's bootstrap servers. Default: `[kafka]`'s.",
    "kafka": "Kafka client properties (the producer's on the source side, the "
             "consumer's on the sink side), over `[kafka] properties` unless the "
             "connector names its own `bootstrap_servers`. Secrets are never printed.",
    "converter": "How keys and values are written and read: a table, see "
                 "[Converters](#converters).",
    "transforms": "A chain of steps applied to every record in order: see "
                  "[Transforms](#transforms).",
    "cache_filter": "`module:function`: an entry predicate `(cache, key, value) -> bool`, "
                    "imported only from a module of the allow-list (see "
                    "[The allow-list](#the-allow-list)). Entries it refuses are counted "
                    "as filtered.",
    "error_handling_policy": "What happens to a record that cannot be filtered, "
                             "transformed, converted or applied: `STOP_TASK`, `LOG_ONLY` "
                             "or `DEAD_LETTER` (see [Error policies](#error-policies)). "
                             "Kafka Connect's `errors.tolerance` `none` / `all` mean "
                             "`STOP_TASK` / `LOG_ONLY` (`all` with a dead-letter topic: "
                             "`DEAD_LETTER`).",
    "dead_letter_topic": "The dead-letter topic; required with `DEAD_LETTER`, refused "
                         "with another policy (it would be ignored). A sink refuses one "
                         "it would read itself.",
    # source
    "failover_policy": "What a (re)started source does about the changes made while it "
                       "was down: `NONE`, `FULL_SNAPSHOT` or `BACKLOG` (see "
                       "[Failover policies](#failover-policies)).",
    "on_position_lost": "When a cache's stored position is no longer valid (journal "
                        "overflow, a full Hazelcast restart, log retention): `fail` the "
                        "connector with an error naming the cache, or `snapshot` the "
                        "cache again (reported).",
    "shall_load_initial_data": "On the first start, snapshot each cache before streaming "
                               "its changes.",
    "shall_process_removals": "Write removals as tombstones (no value); otherwise they "
                              "are left out.",
    "cache_whitelist": "Regular expressions (whole name); only caches matching one are "
                       "read. Empty: every cache. A list or comma-separated text "
                       "(a comma inside a pattern's `{m,n}`, group or class stays in it).",
    "cache_blacklist": "Regular expressions (whole name); caches matching one are left "
                       "out (applied after the whitelist).",
    "cache_list_poll_interval_ms": "How often the grid's cache list is read: caches "
                                   "created or dropped while running are picked up "
                                   "within it. Milliseconds or text (`\"5 seconds\"`).",
    "poll_interval_ms": "The micro-batch interval (the trigger): while changes flow, a "
                        "change is planned into a batch within it. Milliseconds or text.",
    "idle_poll_interval_ms": "After a check of the grid found no change, the checks back "
                             "off (doubling from `pollInterval`) up to this interval: a "
                             "quiet grid is checked this often, and the first change after "
                             "a quiet spell waits at most this long (a cache created "
                             "meanwhile: found at the first check after "
                             "`cacheListPollInterval`). Milliseconds or text.",
    "batch_size": "Rows of a snapshot taken per micro-batch (per snapshotting cache).",
    "max_changes_per_batch": "The most changes a micro-batch streams (all caches "
                             "together; a backlog drains as many batches). Under "
                             "`exactly_once` the connector lowers it further to what it "
                             "measured it can write in a quarter of "
                             "`transaction.timeout.ms` (first batch: at 2,000 changes/s).",
    "topic_prefix": "A record's topic is `topicPrefix` + its cache (unless a `route` "
                    "transform changes it).",
    "topic_partitions": "Partitions of the topics the connector creates.",
    "delivery_guarantee": "`exactly_once`: each partition of a batch in one Kafka "
                          "transaction with a commit marker (read_committed consumers see "
                          "every change once); `at_least_once`: idempotent producers "
                          "(`acks=all`), a re-run batch is written again. Kafka Connect's "
                          "`exactly.once.support` `required` / `requested` mean "
                          "`exactly_once`.",
    "transaction_timeout_ms": "The Kafka transaction timeout of the exactly-once writer; "
                              "must exceed twice `pollInterval`.",
    # sink
    "topics": "The topics to read: a list or comma-separated text. Exactly one of "
              "`topics` and `topics.regex`.",
    "topics_regex": "A regular expression of the topics to read (whole name; topics "
                    "created later are read too).",
    "cache_prefix": "A record's cache is `cachePrefix` + its topic (unless a transform "
                    "routes it); missing caches are created.",
    "tasks_max": "Parallel writers: on Hazelcast, the Spark tasks that apply a batch with "
                 "`put_all`; on the embedded Space the process owning it applies each "
                 "batch.",
    "push_interval_ms": "The micro-batch interval (the trigger). Milliseconds or text.",
    "flush_on_offset_commit": "The seed's option. Every batch is applied to the grid "
                              "before Spark commits its offsets, whatever its value.",
    "shall_process_updates": "`false`: never overwrite or remove an existing entry (put "
                             "if absent; tombstones of existing keys are ignored). "
                             "`true`: puts overwrite, tombstones remove.",
    "key_policy": "Where an entry's key comes from: `key` (the record's key, by the key "
                  "converter), `value` (`keyFields` of the value) or `kafka` "
                  "(`\"topic/partition/offset\"`).",
    "key_fields": "With `keyPolicy = \"value\"`: the value's fields making the key. One "
                  "field: its value (a string or an integer); several: the compact JSON "
                  "array text of their values (`[\"eu\",12]`).",
    "starting_offsets": "Where a sink without a checkpoint starts: `earliest` or "
                        "`latest`.",
    "max_offsets_per_trigger": "The most records per micro-batch (Spark's "
                               "`maxOffsetsPerTrigger`).",
    "skip_records": "Records to pass over on purpose, `topic[partition]@offset` each, as "
                    "a failure names them (a poisoned record that stops the connector "
                    "under `STOP_TASK`): counted as skipped, logged, and listed in the "
                    "checkpoint's `skipped.jsonl`.",
    # grids
    "grid.kind": "`space` (gridstream's embedded Space) or `hazelcast`: which table this "
                 "is.",
    "data_dir": "The Space's directory.",
    "space_name": "The Space's name.",
    "source": "The writer name whose versions the grid compares when a batch is applied "
              "again; writers with unrelated versions need distinct names.",
    "id_property": "The id property of the document types created for missing caches.",
    "cluster_name": "The Hazelcast cluster's name.",
    "members": "Member addresses `host:port`: a list or comma-separated text.",
    "connect_timeout_s": "How long to try to reach the cluster (at open and after losing "
                         "it) before failing, in seconds.",
    "invocation_timeout_s": "How long one operation may be retried (e.g. while a lost "
                            "member's partitions move), in seconds.",
    # converters
    "value": "`json` (a JSON object), `json_schema` (Kafka Connect's `{\"schema\", "
             "\"payload\"}` envelope) or `avro` (Confluent wire format, schemas in the "
             "registry). Kafka Connect's class names are accepted.",
    "key": "`json` (a JSON scalar: `\"k-1\"` or `12`) or `string` (UTF-8 text).",
    "schema_registry_url": "The schema registry (required with `avro`; refused with "
                           "another converter, as are the other Avro options).",
    "schema_registry_user_info": "`user:password` for the registry's basic "
                                 "authentication; never printed.",
    "subject_name_strategy": "Avro subjects: `topic` (`<topic>-value`), `record` or "
                             "`topic_record`.",
    "avro_schemas": "Source side, Avro: cache name → `.avsc` file; a cache without one "
                    "gets a schema inferred from its entries. Refused on a sink (it reads "
                    "with the writer's schema).",
}
