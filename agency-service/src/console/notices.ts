/**
 * Notices after a change ("Key web backend (…Moy3) was revoked"), shown once:
 * the change stores one for the session and the page it redirects to; that
 * page takes it (deleting it in the same statement), so a reload or Back
 * never shows it again and nothing of it lives in the address bar.
 */
import type { Pool } from '@scoped/shared/db'

export interface StoredNotice {
  notice: string
  subject: string | null
}

/** Older than this, an untaken notice is stale and dropped. */
const NOTICE_LIFETIME_MS = 10 * 60_000

export async function storeNotice(pool: Pool, sessionTokenHash: string, page: string, notice: StoredNotice, now: Date): Promise<void> {
  await pool.query(`DELETE FROM console_notices WHERE created_at <= $1`, [new Date(now.getTime() - NOTICE_LIFETIME_MS)])
  await pool.query(`INSERT INTO console_notices (session_token_hash, page, notice, subject, created_at) VALUES ($1, $2, $3, $4, $5)`, [
    sessionTokenHash,
    page,
    notice.notice,
    notice.subject,
    now,
  ])
}

/** The newest notice of this session for this page, once; undefined when there is none. */
export async function takeNotice(pool: Pool, sessionTokenHash: string, page: string): Promise<StoredNotice | undefined> {
  const { rows } = await pool.query<StoredNotice & { id: string }>(
    `DELETE FROM console_notices WHERE session_token_hash = $1 AND page = $2 RETURNING id, notice, subject`,
    [sessionTokenHash, page],
  )
  const newest = rows.sort((a, b) => Number(b.id) - Number(a.id))[0]
  return newest === undefined ? undefined : { notice: newest.notice, subject: newest.subject }
}
