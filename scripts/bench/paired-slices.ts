/**
 * The paired measurement's schedule (paired.ts) and, for wrk, its figures:
 * slices ordered A B B A, A B B A, … (A the bare proxy, B the other target),
 * so that a machine speeding up or slowing down over a group of four favours
 * neither. Per group, the second target's requests/s ÷ the first's, each the
 * mean of its two slices' rates. The Node generator (paired-load.ts) runs the
 * same order in one process; wrk runs one process per target, each sending
 * only within its own slices (wrk.lua).
 */
import type { PairedResult, PairedTargetResult } from './paired-load.js'
import type { WrkResult, WrkSlice } from './wrk-result.js'
import { wrkLatency, wrkStatuses } from './wrk-result.js'

export const SLICE_ORDER = [0, 1, 1, 0] as const

/** The slices (numbered from 0) of target `target` among `slices`. */
export function ownSlices(target: 0 | 1, slices: number): number[] {
  return Array.from({ length: slices }, (_, index) => index).filter((index) => SLICE_ORDER[index % SLICE_ORDER.length] === target)
}

/** Per group of four slices, B's rate ÷ A's, from each target's own slices. */
export function groupRatios(first: readonly WrkSlice[], second: readonly WrkSlice[]): number[] {
  const groups = Math.max(0, ...[...first, ...second].map((slice) => Math.floor(slice.index / SLICE_ORDER.length) + 1))
  const rate = (slices: readonly WrkSlice[], group: number): number => {
    const mine = slices.filter((slice) => Math.floor(slice.index / SLICE_ORDER.length) === group)
    return mine.reduce((sum, slice) => sum + slice.answers / (slice.ms / 1000), 0) / mine.length
  }
  return Array.from({ length: groups }, (_, group) => rate(second, group) / rate(first, group))
}

function targetResult(result: WrkResult): PairedTargetResult {
  const requests = result.slices.reduce((sum, slice) => sum + slice.answers, 0)
  const seconds = result.slices.reduce((sum, slice) => sum + slice.ms, 0) / 1000
  return { requests, seconds, perSecond: seconds === 0 ? 0 : requests / seconds, statuses: wrkStatuses(result), ...wrkLatency(result) }
}

/** paired-load.ts's result, from the two wrk runs (the bare proxy's first). */
export function pairedFromWrk(first: WrkResult, second: WrkResult): PairedResult {
  return { targets: [targetResult(first), targetResult(second)], groupRatios: groupRatios(first.slices, second.slices) }
}
