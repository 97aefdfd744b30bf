/*
 * object_uses.h -- the lower layers' functions the upper layers call, each
 * under the name libcpprof.so exports it by: cpprof__NAME.
 *
 * libcpprof-upper.so (upper.h) calls down into libcpprof.so.  Under their
 * own names these functions would be looked up in the program's symbol
 * scope first, where any function of the program's of the same name (a
 * program linked with --export-dynamic, such as PostgreSQL or nginx,
 * exports all of its) would take the call.  So libcpprof.so exports each
 * under an alias with cpprof's prefix, made where it is defined
 * (upper_calls.h: its own calls stay direct), and the upper objects are
 * compiled with this file included first, calling the aliases.  The
 * tests' library and libcpprof.a link the same upper objects, and the
 * lower objects that define the aliases.  A new call from the upper
 * layers down fails to link until it is added here and marked there.
 */
#ifndef CPPROF_OBJECT_USES_H
#define CPPROF_OBJECT_USES_H

#define accounting_enabled cpprof__accounting_enabled
#define accounting_rows cpprof__accounting_rows
#define accounting_rows_free cpprof__accounting_rows_free
#define accounting_tick_yielded cpprof__accounting_tick_yielded
#define accounting_user_names cpprof__accounting_user_names
#define addr_is_loopback cpprof__addr_is_loopback
#define addr_listen cpprof__addr_listen
#define addr_parse cpprof__addr_parse
#define alloc_next_slow cpprof__alloc_next_slow
#define atfork_add cpprof__atfork_add
#define block_snapshot cpprof__block_snapshot
#define census_count_leaked cpprof__census_count_leaked
#define census_crew_cpu_ns cpprof__census_crew_cpu_ns
#define census_release cpprof__census_release
#define census_signal_is_programs cpprof__census_signal_is_programs
#define census_take cpprof__census_take
#define census_take_labels cpprof__census_take_labels
#define census_take_leaked cpprof__census_take_leaked
#define census_take_stacks cpprof__census_take_stacks
#define cfg_env_name cpprof__cfg_env_name
#define cfg_int cpprof__cfg_int
#define cfg_refused cpprof__cfg_refused
#define cfg_server_address_allowed cpprof__cfg_server_address_allowed
#define cfg_server_refused cpprof__cfg_server_refused
#define cfg_str cpprof__cfg_str
#define forkwake_arm cpprof__forkwake_arm
#define forkwake_disarm cpprof__forkwake_disarm
#define forkwake_forget_after_fork cpprof__forkwake_forget_after_fork
#define forkwake_mark_serving cpprof__forkwake_mark_serving
#define forkwake_prepare cpprof__forkwake_prepare
#define forkwake_rearm cpprof__forkwake_rearm
#define forkwake_secret cpprof__forkwake_secret
#define forkwake_state_of cpprof__forkwake_state_of
#define forkwake_send cpprof__forkwake_send
#define forkwake_table cpprof__forkwake_table
#define godump_created_by cpprof__godump_created_by
#define godump_file cpprof__godump_file
#define godump_function cpprof__godump_function
#define godump_header cpprof__godump_header
#define heap_declined cpprof__heap_declined
#define heap_get_stats cpprof__heap_get_stats
#define heap_internal_stats cpprof__heap_internal_stats
#define heap_scale cpprof__heap_scale
#define heap_snapshot cpprof__heap_snapshot
#define heap_track_from_now cpprof__heap_track_from_now
#define heap_unseen cpprof__heap_unseen
#define labelset_drop cpprof__labelset_drop
#define labelset_hold cpprof__labelset_hold
#define labelset_interned_count cpprof__labelset_interned_count
#define labelset_key cpprof__labelset_key
#define labelset_value cpprof__labelset_value
#define loader_counts_now cpprof__loader_counts_now
#define mutex_snapshot cpprof__mutex_snapshot
#define own_busy_exchange cpprof__own_busy_exchange
#define own_work_enter cpprof__own_work_enter
#define own_work_leave cpprof__own_work_leave
#define procfile_read cpprof__procfile_read
#define procfile_status_value cpprof__procfile_status_value
#define procfile_title cpprof__procfile_title
#define procmaps_check cpprof__procmaps_check
#define procmaps_foreach cpprof__procmaps_foreach
#define procmaps_path_is cpprof__procmaps_path_is
#define proctasks_next cpprof__proctasks_next
#define proctasks_open cpprof__proctasks_open
#define sampler_collector_cpu_ns cpprof__sampler_collector_cpu_ns
#define sampler_period_ns cpprof__sampler_period_ns
#define sampler_reason_frame cpprof__sampler_reason_frame
#define sampler_reason_text cpprof__sampler_reason_text
#define sampler_running cpprof__sampler_running
#define sampler_signal_is_programs cpprof__sampler_signal_is_programs
#define sampler_start cpprof__sampler_start
#define sampler_stop cpprof__sampler_stop
#define sampleset_add cpprof__sampleset_add
#define sampleset_free cpprof__sampleset_free
#define sampleset_new cpprof__sampleset_new
#define sampleset_sorted cpprof__sampleset_sorted
#define sampleset_subtract cpprof__sampleset_subtract
#define sampleset_trim cpprof__sampleset_trim
#define stacktab_foreach cpprof__stacktab_foreach
#define stacktab_free cpprof__stacktab_free
#define task_foreach_parked cpprof__task_foreach_parked
#define task_parked_count cpprof__task_parked_count
#define text_escape cpprof__text_escape
#define text_put_escaped cpprof__text_put_escaped
#define thread_own_role cpprof__thread_own_role
#define threadcreate_creator cpprof__threadcreate_creator
#define threadcreate_snapshot cpprof__threadcreate_snapshot
#define trace_flight_on cpprof__trace_flight_on
#define trace_snapshot_free cpprof__trace_snapshot_free
#define trace_snapshot_take cpprof__trace_snapshot_take
#define trace_window_begin cpprof__trace_window_begin
#define trace_window_end cpprof__trace_window_end
#define unwind_gone_at cpprof__unwind_gone_at
#define unwind_pin_generation cpprof__unwind_pin_generation
#define unwind_unpin_generation cpprof__unwind_unpin_generation
#define wall_end cpprof__wall_end
#define wall_get_stats cpprof__wall_get_stats
#define wall_missing_samples cpprof__wall_missing_samples
#define wall_run cpprof__wall_run
#define wall_samples cpprof__wall_samples
#define wall_start cpprof__wall_start
#define warn_program_name cpprof__warn_program_name
#define warn_stderr cpprof__warn_stderr

#endif
