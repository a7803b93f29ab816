/* kvplan runtime — C API (stable; the one installed public header of kvplan).
 *
 * Caches packed KV chunks of a kvplan precision plan across a device pool, a pinned host tier and
 * an optional disk tier, keyed by chained hashes of token chunks. Every object read back is
 * checked (plan, model, formats and versions, geometry, payload checksum) before it is loaded.
 * A plan is only used for the model it was made for: kvplan_runtime_create refuses it unless the
 * served model is named (its KV geometry or fingerprint) and matches, or the check is waived.
 *
 *   kvplan_options* opt;  kvplan_options_create(&opt);
 *   kvplan_options_set_host_capacity_bytes(opt, 1ull << 30);
 *   kvplan_options_set_model_geometry(opt, 32, 8, 128);  // layers, KV heads, head_dim
 *   kvplan_runtime* rt;
 *   if (kvplan_runtime_create("plan.json", opt, &rt) != KVPLAN_OK)
 *     fprintf(stderr, "%s\n", kvplan_last_error_message());
 *   printf("device memory: %s\n", kvplan_runtime_backend_name(rt));   // "host" without a GPU
 *   kvplan_device_chunk* c;
 *   kvplan_runtime_acquire_chunk(rt, tokens, n_tokens, 0, &c);   // chunk 0 of tokens
 *   ... write pages into kvplan_device_chunk_data(c) (or kvplan_device_chunk_write) ...
 *   kvplan_transfer* t;  kvplan_runtime_store(rt, c, NULL, &t);
 *   kvplan_transfer_wait(t);  kvplan_transfer_destroy(t);  kvplan_device_chunk_release(rt, c);
 *   uint64_t prefix;  kvplan_runtime_lookup(rt, tokens, n_tokens, where, max, &prefix);
 *   kvplan_runtime_load(rt, tokens, n_tokens, UINT64_MAX, &t);  kvplan_transfer_wait(t);
 *
 * Conventions: every function returns a kvplan_status; on failure kvplan_last_error_message()
 * (per thread) says what went wrong. No function throws or aborts on bad input. Handles are
 * opaque; destroy what you create. All functions are thread-safe unless noted.
 */
#ifndef KVPLAN_RUNTIME_H
#define KVPLAN_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define KVPLAN_API __declspec(dllexport)
#else
#define KVPLAN_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a change can break a caller built against an earlier header
 * (kvplan_runtime_abi_version returns the library's). Signatures are only added, never changed.
 *   1: first release.
 *   2: kvplan_runtime_create refuses a plan unless the served model is given
 *      (kvplan_options_set_model_geometry / _fingerprint) or the check is waived
 *      (kvplan_options_set_skip_model_check); adds kvplan_options_set_skip_model_check,
 *      kvplan_options_set_require_gpu and kvplan_runtime_backend_name.
 *      Added since, with nothing an earlier caller does changed: the head-run functions
 *      (kvplan_runtime_head_run_count ... kvplan_runtime_unpack_run_page) for per-KV-head plans,
 *      which earlier libraries refused at kvplan_runtime_create. */
#define KVPLAN_RUNTIME_ABI_VERSION 2

/* kvplan_runtime_backend_name of a runtime whose "device" memory is ordinary host memory (built
 * without GPU support, or no GPU found and none required). */
#define KVPLAN_BACKEND_HOST "host"

typedef int32_t kvplan_status;
enum {
  KVPLAN_OK = 0,
  KVPLAN_INVALID_ARGUMENT = 1,
  KVPLAN_NOT_FOUND = 2,
  KVPLAN_OUT_OF_RANGE = 3,
  KVPLAN_DATA_LOSS = 4,          /* a stored object was refused (checksum, plan, format, ...) */
  KVPLAN_RESOURCE_EXHAUSTED = 5, /* capacity or pinned memory */
  KVPLAN_UNIMPLEMENTED = 6,
  KVPLAN_INTERNAL = 7,
  KVPLAN_IO = 8
};

/* Where a chunk lives (kvplan_runtime_lookup). */
enum { KVPLAN_TIER_MISS = 0, KVPLAN_TIER_DEVICE = 1, KVPLAN_TIER_HOST = 2, KVPLAN_TIER_DISK = 3 };
/* Which half of a page. */
enum { KVPLAN_KEY = 0, KVPLAN_VALUE = 1 };

typedef struct kvplan_options kvplan_options;
typedef struct kvplan_runtime kvplan_runtime;
typedef struct kvplan_device_chunk kvplan_device_chunk;
typedef struct kvplan_transfer kvplan_transfer;

typedef struct kvplan_stats {
  uint64_t bytes_device_to_host, bytes_host_to_device, bytes_to_disk, bytes_from_disk;
  uint64_t stores_ok, stores_failed, stores_deduplicated, loads_chunks;
  uint64_t lookups, hits_device, hits_host, hits_disk, misses, recomputed_tokens;
  uint64_t evictions_device, evictions_host, evictions_disk, refusals;
  double device_to_host_bytes_per_second, device_to_host_t0_seconds;
  double host_to_device_bytes_per_second, host_to_device_t0_seconds;
} kvplan_stats;

KVPLAN_API const char* kvplan_last_error_message(void);
KVPLAN_API uint32_t kvplan_runtime_abi_version(void);

KVPLAN_API kvplan_status kvplan_options_create(kvplan_options** out);
KVPLAN_API void kvplan_options_destroy(kvplan_options* options);
KVPLAN_API kvplan_status kvplan_options_set_chunk_tokens(kvplan_options* o, uint64_t tokens);
KVPLAN_API kvplan_status kvplan_options_set_device_capacity_bytes(kvplan_options* o, uint64_t b);
KVPLAN_API kvplan_status kvplan_options_set_host_capacity_bytes(kvplan_options* o, uint64_t b);
/* dir NULL or "" disables the disk tier. Chunks go to <dir>/<plan fp>-<model fp>/ (16 hex digits
 * each), which one runtime at a time may use: kvplan_runtime_create fails with
 * KVPLAN_RESOURCE_EXHAUSTED while another holds it. capacity_bytes is that subdirectory's. */
KVPLAN_API kvplan_status kvplan_options_set_disk(kvplan_options* o, const char* dir,
                                                 uint64_t capacity_bytes, int32_t fsync);
/* The served model. kvplan_runtime_create checks the plan against what is given here and refuses
 * (KVPLAN_INVALID_ARGUMENT, the message says what differs) a plan made for another model; with
 * neither set it refuses to run at all unless kvplan_options_set_skip_model_check waives the check.
 * Fingerprint: the model's hex fingerprint as `kvplan inspect` prints it and plan.json records in
 * model.fingerprint (NULL or "" unsets it); it can vouch only for a plan that records one. */
KVPLAN_API kvplan_status kvplan_options_set_model_fingerprint(kvplan_options* o, const char* hex);
/* Geometry: the served model's KV shape (uniform layers): layer count, KV heads, head_dim. */
KVPLAN_API kvplan_status kvplan_options_set_model_geometry(kvplan_options* o, int32_t n_layers,
                                                           int32_t n_kv_heads, int32_t head_dim);
/* skip != 0: use the plan without a served model to check it against (for callers that know by
 * other means that it matches; a plan for another model packs pages of the wrong shape). A
 * fingerprint or geometry that is set is still checked. Default 0. */
KVPLAN_API kvplan_status kvplan_options_set_skip_model_check(kvplan_options* o, int32_t skip);
/* required != 0: kvplan_runtime_create fails unless device memory is on a GPU (GPU 0), with the
 * reason: KVPLAN_UNIMPLEMENTED when the library has no GPU support, KVPLAN_NOT_FOUND when no GPU
 * is found. 0 (default): GPU 0 when one is found, else host memory stands in for device memory
 * (kvplan_runtime_backend_name says which). */
KVPLAN_API kvplan_status kvplan_options_set_require_gpu(kvplan_options* o, int32_t required);

/* Threads hashing payload checksums next to the transfers: -1 (default) lets the backend choose,
 * 0 hashes on the transfer thread alone, up to 256. */
KVPLAN_API kvplan_status kvplan_options_set_hash_threads(kvplan_options* o, int32_t threads);

/* options may be NULL (defaults). */
KVPLAN_API kvplan_status kvplan_runtime_create(const char* plan_path, const kvplan_options* options,
                                               kvplan_runtime** out);
KVPLAN_API void kvplan_runtime_destroy(kvplan_runtime* rt);
/* Where device memory lives: KVPLAN_BACKEND_HOST ("host") when host memory stands in for a GPU,
 * else the GPU API, index and name, e.g. "CUDA (NVIDIA) device 0 (NVIDIA H200)". Valid while rt
 * lives; "" for NULL. */
KVPLAN_API const char* kvplan_runtime_backend_name(const kvplan_runtime* rt);

/* Layout queries. */
KVPLAN_API uint64_t kvplan_runtime_chunk_tokens(const kvplan_runtime* rt);
KVPLAN_API uint64_t kvplan_runtime_chunk_bytes(const kvplan_runtime* rt);
KVPLAN_API uint32_t kvplan_runtime_layer_count(const kvplan_runtime* rt);
KVPLAN_API uint32_t kvplan_runtime_transfer_group_count(const kvplan_runtime* rt);
KVPLAN_API uint64_t kvplan_runtime_plan_fingerprint(const kvplan_runtime* rt);
/* A page of a layer of one pair: its offset in a chunk image, its bytes and its f32 values. A
 * layer whose KV heads take different pairs (a per-KV-head plan) is refused
 * (KVPLAN_INVALID_ARGUMENT): address its head runs with the kvplan_runtime_run_* functions below.
 */
KVPLAN_API kvplan_status kvplan_runtime_page_info(const kvplan_runtime* rt, uint32_t layer,
                                                  uint64_t page, int32_t side, uint64_t* offset,
                                                  uint64_t* bytes, uint64_t* n_values);
/* Packs n_values f32 ([block_size, n_kv_heads, head_dim]) into a page of `bytes` bytes. */
KVPLAN_API kvplan_status kvplan_runtime_pack_page(const kvplan_runtime* rt, uint32_t layer,
                                                  int32_t side, const float* values,
                                                  uint64_t n_values, uint8_t* out, uint64_t bytes);
KVPLAN_API kvplan_status kvplan_runtime_unpack_page(const kvplan_runtime* rt, uint32_t layer,
                                                    int32_t side, const uint8_t* packed,
                                                    uint64_t bytes, float* values,
                                                    uint64_t n_values);

/* Head runs: a layer is paged as runs of consecutive KV heads taking one (K, V) pair, each run a
 * page of its heads alone ([block_size, n_heads, head_dim] values). A layer of one pair is one run
 * of all its heads (run 0, the pages above); a per-KV-head plan's layer may have several. */
KVPLAN_API uint32_t kvplan_runtime_head_run_count(const kvplan_runtime* rt, uint32_t layer);
KVPLAN_API kvplan_status kvplan_runtime_head_run_info(const kvplan_runtime* rt, uint32_t layer,
                                                      uint32_t run, uint32_t* first_head,
                                                      uint32_t* n_heads);
KVPLAN_API kvplan_status kvplan_runtime_run_page_info(const kvplan_runtime* rt, uint32_t layer,
                                                      uint32_t run, uint64_t page, int32_t side,
                                                      uint64_t* offset, uint64_t* bytes,
                                                      uint64_t* n_values);
KVPLAN_API kvplan_status kvplan_runtime_pack_run_page(const kvplan_runtime* rt, uint32_t layer,
                                                      uint32_t run, int32_t side,
                                                      const float* values, uint64_t n_values,
                                                      uint8_t* out, uint64_t bytes);
KVPLAN_API kvplan_status kvplan_runtime_unpack_run_page(const kvplan_runtime* rt, uint32_t layer,
                                                        uint32_t run, int32_t side,
                                                        const uint8_t* packed, uint64_t bytes,
                                                        float* values, uint64_t n_values);

/* Keys of the whole chunks of tokens; *n_keys = how many (at most capacity written). */
KVPLAN_API kvplan_status kvplan_runtime_chunk_keys(const kvplan_runtime* rt, const uint32_t* tokens,
                                                   uint64_t n_tokens, uint64_t* keys,
                                                   uint64_t capacity, uint64_t* n_keys);

/* A device slot for chunk `chunk_index` of tokens; KVPLAN_RESOURCE_EXHAUSTED if none is free or
 * the chunk is already on the device. */
KVPLAN_API kvplan_status kvplan_runtime_acquire_chunk(kvplan_runtime* rt, const uint32_t* tokens,
                                                      uint64_t n_tokens, uint64_t chunk_index,
                                                      kvplan_device_chunk** out);
KVPLAN_API void* kvplan_device_chunk_data(const kvplan_device_chunk* c); /* device pointer */
KVPLAN_API uint64_t kvplan_device_chunk_bytes(const kvplan_device_chunk* c);
KVPLAN_API uint64_t kvplan_device_chunk_key(const kvplan_device_chunk* c);
KVPLAN_API kvplan_status kvplan_device_chunk_write(kvplan_runtime* rt, const kvplan_device_chunk* c,
                                                   uint64_t offset, const void* src,
                                                   uint64_t bytes);
KVPLAN_API kvplan_status kvplan_device_chunk_read(kvplan_runtime* rt, const kvplan_device_chunk* c,
                                                  uint64_t offset, void* dst, uint64_t bytes);
/* Hands the slot back and frees the handle. */
KVPLAN_API kvplan_status kvplan_device_chunk_release(kvplan_runtime* rt, kvplan_device_chunk* c);

/* Device -> host, asynchronous, after the work queued on producer_stream (NULL: default). */
KVPLAN_API kvplan_status kvplan_runtime_store(kvplan_runtime* rt, const kvplan_device_chunk* c,
                                              void* producer_stream, kvplan_transfer** out);
/* Longest cached prefix: tiers[i] (KVPLAN_TIER_*) for up to capacity chunks; *prefix_chunks. */
KVPLAN_API kvplan_status kvplan_runtime_lookup(kvplan_runtime* rt, const uint32_t* tokens,
                                               uint64_t n_tokens, int32_t* tiers, uint64_t capacity,
                                               uint64_t* prefix_chunks);
/* Host/disk -> device, asynchronous; the loaded chunks come from kvplan_transfer_chunk. */
KVPLAN_API kvplan_status kvplan_runtime_load(kvplan_runtime* rt, const uint32_t* tokens,
                                             uint64_t n_tokens, uint64_t max_chunks,
                                             kvplan_transfer** out);
KVPLAN_API kvplan_status kvplan_runtime_pin(kvplan_runtime* rt, uint64_t key, int32_t pinned);
/* Drops the chunk from `tier` (KVPLAN_TIER_DEVICE/HOST/DISK), or from every tier with
 * KVPLAN_TIER_MISS; KVPLAN_RESOURCE_EXHAUSTED if it is pinned or in use there. */
KVPLAN_API kvplan_status kvplan_runtime_evict(kvplan_runtime* rt, uint64_t key, int32_t tier);
KVPLAN_API kvplan_status kvplan_runtime_flush(kvplan_runtime* rt);
KVPLAN_API kvplan_status kvplan_runtime_stats(const kvplan_runtime* rt, kvplan_stats* out);
KVPLAN_API uint64_t kvplan_runtime_refusals(const kvplan_runtime* rt);

/* Completion: returns the transfer's status (KVPLAN_DATA_LOSS for a refused object). */
KVPLAN_API kvplan_status kvplan_transfer_wait(kvplan_transfer* t);
/* 1 when complete, 0 when still running. */
KVPLAN_API int32_t kvplan_transfer_ready(const kvplan_transfer* t);
/* Loads: how many chunks are on the device after kvplan_transfer_wait, and each one (ownership
 * moves to the caller: release it with kvplan_device_chunk_release). */
KVPLAN_API uint64_t kvplan_transfer_chunk_count(kvplan_transfer* t);
KVPLAN_API kvplan_status kvplan_transfer_take_chunk(kvplan_transfer* t, uint64_t index,
                                                    kvplan_device_chunk** out);
/* Releases chunks not taken. */
KVPLAN_API void kvplan_transfer_destroy(kvplan_transfer* t);

#ifdef __cplusplus
}
#endif

#endif /* KVPLAN_RUNTIME_H */
