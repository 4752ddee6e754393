/**
 * A console form that creates or changes something, submitted once whatever
 * the browser does. The form's one-time token (form-token.ts) claims a row of
 * console_form_submissions (Postgres, so every agency-service replica sees
 * it); the first submission does the change and records its answer; any
 * other submission of the same token, at the same moment or later, waits for
 * that answer and gets it: the same redirect, for a new key the same one-time
 * display with the same key or invitation link (one-time-display.ts), or the
 * same error page. Exactly
 * one change is made.
 *
 * A form that is refused (a field to correct, a confirmation to give) made
 * no change: its claim is released, so the same submission again is judged
 * again. A claim whose first submission never answered (its process died)
 * is answered "still being processed" instead of being done a second time.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'
import { sessionOf } from './authenticate.js'
import { cookieOptions, REVEAL_COOKIE } from './cookies.js'
import { sendErrorPage, sendPage, shownError } from './error-page.js'
import { formTokenOf } from './form-token.js'
import type { Reveal } from './one-time-display.js'
import { REVEAL_LIFETIME_MS, sealSecret } from './one-time-display.js'
import type { ConsolePaths } from './paths.js'
import { hashToken, SESSION_LIFETIME_MS } from './sessions.js'

/**
 * What a form's first submission did: a change (answered with a redirect, to the one-time display of
 * `reveal` when it made a key or an invitation), or nothing (a page to show).
 */
export type FormOutcome = { kind: 'redirect'; location: string; reveal?: Reveal } | { kind: 'page'; status: number; body: string }

/** What a repeated submission is answered with. */
type Recorded = { location: string; reveal?: true } | { error: { status: number; message: string } }

interface Submission {
  action: string
  outcome: Recorded | null
  reveal_until: Date | null
}

export interface FormOnceOptions {
  pool: Pool
  now: () => Date
  paths: ConsolePaths
}

/** How long a repeated submission waits for the first one's answer (a change waits up to 10 s for the gateways). */
const WAIT_MS = 30_000
const POLL_MS = 50

export const STILL_PROCESSING_MESSAGE =
  'This form was already sent and is still being processed, or its processing was interrupted. Check the page it changes before trying again.'
export const OTHER_FORM_MESSAGE = 'This form was already used for another change. Reload the page and try again.'

export async function submitOnce(
  options: FormOnceOptions,
  request: FastifyRequest,
  reply: FastifyReply,
  work: () => Promise<FormOutcome>,
): Promise<FastifyReply> {
  const token = formTokenOf(request)
  const key = { session: sessionOf(request).tokenHash, token: hashToken(token) }
  const action = request.url.split('?', 1)[0]!
  const deadline = Date.now() + WAIT_MS
  for (;;) {
    const seen = await claim(options, key, action)
    if (seen === 'claimed') return first(options, request, reply, token, key, work)
    // The session ended meanwhile (the first submission changed the password, or the user was disabled), and its
    // claims with it: answered as any request of an ended session is.
    if (seen === 'session-ended') return reply.redirect(options.paths.signIn, 303)
    if (seen !== 'released') {
      if (seen.action !== action) throw new ApiError('conflict', OTHER_FORM_MESSAGE)
      if (seen.outcome !== null) return replay(options, request, reply, token, seen)
      if (Date.now() >= deadline) throw new ApiError('conflict', STILL_PROCESSING_MESSAGE)
      await sleep(POLL_MS)
    }
  }
}

type SubmissionKey = { session: string; token: string }

/** Postgres' foreign_key_violation: a claim's session row is gone. */
const SESSION_GONE = '23503'

/**
 * Claims the token for this submission, or reads the claim another made ('released': it was given up
 * meanwhile; 'session-ended': the session it belongs to is gone, and its claims with it).
 */
async function claim(options: FormOnceOptions, key: SubmissionKey, action: string): Promise<'claimed' | 'released' | 'session-ended' | Submission> {
  const now = options.now()
  await options.pool.query(`DELETE FROM console_form_submissions WHERE expires_at <= $1`, [now])
  let inserted
  try {
    inserted = await options.pool.query(
      `INSERT INTO console_form_submissions (session_token_hash, token_hash, action, expires_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT DO NOTHING`,
      [key.session, key.token, action, new Date(now.getTime() + SESSION_LIFETIME_MS)],
    )
  } catch (error) {
    if ((error as { code?: string }).code === SESSION_GONE) return 'session-ended'
    throw error
  }
  if (inserted.rowCount === 1) return 'claimed'
  const { rows } = await options.pool.query<Submission>(
    `SELECT action, outcome, reveal_until FROM console_form_submissions WHERE session_token_hash = $1 AND token_hash = $2`,
    [key.session, key.token],
  )
  return rows[0] ?? 'released'
}

async function first(
  options: FormOnceOptions,
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
  key: SubmissionKey,
  work: () => Promise<FormOutcome>,
): Promise<FastifyReply> {
  const { pool } = options
  let outcome: FormOutcome
  try {
    outcome = await work()
  } catch (error) {
    // Whatever was done stays done: a repeat gets the same error page rather than trying again.
    const { status, message } = shownError(error)
    await record(pool, key, { error: { status, message } }).catch((failure: unknown) =>
      request.log.warn({ err: failure }, 'console: form outcome not recorded'),
    )
    throw error
  }
  if (outcome.kind === 'page') {
    await pool.query(`DELETE FROM console_form_submissions WHERE session_token_hash = $1 AND token_hash = $2`, [key.session, key.token])
    return sendPage(reply, outcome.status, outcome.body)
  }
  if (outcome.reveal === undefined) {
    await record(pool, key, { location: outcome.location })
    return reply.redirect(outcome.location, 303)
  }
  const revealUntil = new Date(options.now().getTime() + REVEAL_LIFETIME_MS)
  await record(pool, key, { location: outcome.location, reveal: true }, [outcome.reveal.id, sealSecret(token, outcome.reveal), revealUntil])
  return revealRedirect(reply, token, outcome.location, REVEAL_LIFETIME_MS)
}

async function record(
  pool: Pool,
  key: SubmissionKey,
  outcome: Recorded,
  reveal: [string, Buffer, Date] | [null, null, null] = [null, null, null],
): Promise<void> {
  await pool.query(
    `UPDATE console_form_submissions SET outcome = $3, key_id = $4, sealed_key = $5, reveal_until = $6 WHERE session_token_hash = $1 AND token_hash = $2`,
    [key.session, key.token, JSON.stringify(outcome), ...reveal],
  )
}

function replay(options: FormOnceOptions, request: FastifyRequest, reply: FastifyReply, token: string, seen: Submission): FastifyReply {
  const outcome = seen.outcome!
  request.log.info({ action: seen.action }, 'console: repeated form submission answered with the first one’s result')
  if ('error' in outcome) return sendErrorPage(reply, options.paths, outcome.error.status, outcome.error.message, sessionOf(request))
  if (outcome.reveal !== true || seen.reveal_until === null) return reply.redirect(outcome.location, 303)
  return revealRedirect(reply, token, outcome.location, seen.reveal_until.getTime() - options.now().getTime())
}

/** To the one-time display, with the form token in a cookie for that page only (what opens the sealed secret). */
function revealRedirect(reply: FastifyReply, token: string, location: string, lifetimeMs: number): FastifyReply {
  reply.setCookie(REVEAL_COOKIE, token, cookieOptions(location.split('?', 1)[0]!, Math.max(0, Math.floor(lifetimeMs / 1000))))
  return reply.redirect(location, 303)
}
