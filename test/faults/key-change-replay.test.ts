/**
 * A roll, a new expiry (a roll's grace period), a revoke and a delete hold on
 * every replica whatever is written back to Redis: the key's genuine
 * "active" entry, captured before the change (ctl as a process), written
 * back right after it, is believed by no gateway process, not even one
 * started after the change. key-changes.ts has the test.
 */
import { ENDING_CHANGES, replayedEntryTest } from './key-changes.js'

replayedEntryTest(ENDING_CHANGES)
