// What a pass driver asks of an engine beyond the common interface (begin, load, compute, end):
// optional members detected at compile time, each with its default.
#pragma once
#include "splat/common.cuh"

// Engines whose compute reads stages through another proxy (wgmma) define landed(), called once a
// stage's copies have completed and before the barrier that publishes it.
template <class E, class = void> struct HasLanded { static constexpr bool value = false; };
template <class E> struct HasLanded<E, decltype(void(&E::landed))> { static constexpr bool value = true; };
// Whether a stage may be refilled only after a block barrier (every warp past its last read), unless
// the engine says its own waits suffice (REFILL_BARRIER: WgmmaEngine with one warpgroup, whose
// wgmma reads complete for all four warps at once).
template <class E, class = void> struct RefillBarrier { static constexpr bool value = true; };
template <class E> struct RefillBarrier<E, decltype(void(E::REFILL_BARRIER))> { static constexpr bool value = E::REFILL_BARRIER; };
// Whether the engine waits for the tile it computes before issuing the next load (EARLY_WAIT):
// WgmmaEngine's proxy fence after the wait then has only that tile's copies outstanding.
template <class E, class = void> struct EarlyWait { static constexpr bool value = false; };
template <class E> struct EarlyWait<E, decltype(void(E::EARLY_WAIT))> { static constexpr bool value = E::EARLY_WAIT; };
// Whether the engine's stages are loaded by TMA and published by mbarriers (USES_TMA: WgmmaEngine):
// no cp.async wait, proxy fence or block barrier per key tile.
template <class E, class = void> struct UsesTma { static constexpr bool value = false; };
template <class E> struct UsesTma<E, decltype(void(E::USES_TMA))> { static constexpr bool value = E::USES_TMA; };
// The engine stores a finished row tile's O through shared memory as whole rows (end_band).
template <class E, class = void> struct StagedEnd { static constexpr bool value = false; };
template <class E> struct StagedEnd<E, decltype(void(E::STAGED_END))> { static constexpr bool value = E::STAGED_END; };

// The engine takes arguments of its own beyond the forward's tensors (bind(const void*), called
// before begin: BwdMmaEngine's BwdArgs).
template <class E, class = void> struct HasBind { static constexpr bool value = false; };
template <class E> struct HasBind<E, decltype(void(&E::bind))> { static constexpr bool value = true; };
