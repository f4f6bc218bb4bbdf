/* agent.h -- firstpass-upload --watch / --target: the agent that runs beside serving engines.
 *
 * agent.c owns the agent's command line, its main loop (watch.h finds whole trace files, this
 * sends them with their labels, spools them when the server is down), the registration of the
 * engines it can reach with the server, the long poll that brings capture requests (no
 * inbound port on the node), and the capture of one engine: its own profiler endpoints
 * (vLLM's and SGLang's POST /start_profile and /stop_profile), then the files it flushes.
 * A capture is in the state file (watch.h) from before /start_profile until the engine
 * answered /stop_profile, so the next run stops what a crash left profiling. Uploads carry
 * Idempotency-Key (the file's file_id); retries back off and end (--give-up); names and
 * labels are repaired to UTF-8; every log line is logfmt (log.h); --health-file is touched
 * while it works. HTTP goes through libcurl with upload.h's settings (fp_curl_common); the
 * spool layout is upload.h's. docs/serving.md is the user's page. */
#ifndef FP_COLLECTOR_AGENT_H
#define FP_COLLECTOR_AGENT_H

/* 1 when argv asks for the agent (--watch or --target among the options). */
int fp_agent_wanted(int argc, char **argv);

/* Runs the agent until SIGTERM or SIGINT. Exit status: 0 after a signal, 2 on a usage error,
 * 1 when it cannot start (state file, watch). */
int fp_agent_main(int argc, char **argv);

#endif
