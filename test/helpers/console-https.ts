/**
 * Signing in to the console through the gateway, over HTTPS, as a browser
 * does: load the form (its CSRF token and sign-in cookie), post it as a
 * same-origin form.
 */
import type { HttpsClient, HttpsResponse } from './https.js'

/** The `name=value` pairs of a response's Set-Cookie headers. */
export function cookiesOf(response: HttpsResponse): Map<string, string> {
  const raw = response.headers['set-cookie']
  const lines = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw]
  const cookies = new Map<string, string>()
  for (const line of lines) {
    const pair = line.split(';')[0] ?? ''
    const eq = pair.indexOf('=')
    if (eq > 0) cookies.set(pair.slice(0, eq), pair.slice(eq + 1))
  }
  return cookies
}

/** Posts the sign-in form; `headers` are added (an X-Forwarded-For a caller invents, say). */
export async function consoleSignIn(api: HttpsClient, email: string, password: string, headers: Record<string, string> = {}): Promise<HttpsResponse> {
  const page = await api.request('/console/sign-in')
  const csrf = /name="csrf" value="([^"]+)"/.exec(page.text)?.[1]
  if (csrf === undefined) throw new Error(`no CSRF token on the sign-in page (${page.status})`)
  const cookie = [...cookiesOf(page)].map(([name, value]) => `${name}=${value}`).join('; ')
  return api.request('/console/sign-in', {
    method: 'POST',
    headers: { ...headers, cookie, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    body: new URLSearchParams({ csrf, email, password }).toString(),
  })
}
