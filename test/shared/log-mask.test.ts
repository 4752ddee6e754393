/**
 * Masking for log lines: a real key never survives, in any spelling a caller
 * can send; the text is cut before anything else; and masking stays linear
 * on hostile input (the 1 MB rows would take minutes with a backtracking
 * pattern; here they only assert the output).
 */
import t from 'tap'
import { generateKey } from '@scoped/shared/keys'
import { maskForLog, maskQuery, REDACTED, REDACTED_KEY } from '@scoped/shared/log-mask'

const show = (raw: string): string =>
  JSON.stringify(raw.length > 100 ? `${raw.slice(0, 100)}…(${raw.length})` : raw).replace(
    /[^\x20-\x7e]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )
const percent = (text: string): string => [...text].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('')

const key = generateKey()
const body = key.slice('sak_live_'.length)
const other = generateKey()
const K = REDACTED_KEY

/** No 8 characters in a row of the secret part of either key are left. */
function leaks(output: string): string | undefined {
  for (const secret of [body, other.slice(9)]) {
    for (let i = 0; i + 8 <= secret.length; i++) if (output.includes(secret.slice(i, i + 8))) return secret.slice(i, i + 8)
  }
  return undefined
}

t.test('maskForLog: every spelling of a key is masked', async (t) => {
  const rows: Array<[string, string, string]> = [
    // name, input, output
    ['the key alone', key, K],
    ['upper-case prefix', `SAK_LIVE_${body}`, K],
    ['mixed case', `Sak_LiVe_${body}`, K],
    ['%5F for _', `sak%5Flive%5F${body}`, K],
    ['%5f for _', `sak%5flive%5f${body}`, K],
    ['%6C for l', `sak_%6Cive_${body}`, K],
    ['%6c%69%76%65 for live', `sak_%6c%69%76%65_${body}`, K],
    ['every character escaped', percent(key), K],
    ['upper-case escapes of upper case', `SAK%5F%4C%49%56%45%5F${body}`, K],
    ['double-encoded _', `sak%255Flive%255F${body}`, K],
    ['triple-encoded _', `sak%25255Flive%25255F${body}`, K],
    ['\\x5f for _', `sak\\x5flive\\x5f${body}`, K],
    ['\\u005f for _', `sak\\u005flive\\u005f${body}`, K],
    ['body escaped too', `sak_live_${percent(body)}`, K],
    ['prefix missing', `_live_${body}`, K],
    ['another prefix', `xyz_live_${body}`, K],
    ['a half key', key.slice(0, 20), K],
    ['in a path', `/v1/agents/${key}/calls`, `/v1/agents/${K}/calls`],
    ['inside ;x', `/v1/agents;x=${key}`, `/v1/agents;x=${K}`],
    ['glued to ;x', `/v1/agents;x${key}`, `/v1/agents;${K}`],
    ['after //', `//${key}`, `//${K}`],
    ['after a URL //', `https://gw.example//${key}?a=1`, `https://gw.example//${K}?a=1`],
    ['Bearer', `Bearer ${key}`, `Bearer ${K}`],
    ['in a query', `?x-api-key=${key}&limit=2`, `?x-api-key=${K}&limit=2`],
    ['in JSON', `{"key":"${key}"}`, `{"key":"${K}"}`],
    ['between dashes', `abc-${key}-def`, `abc-${K}-def`],
    ['glued to letters: the whole run goes', `abc${key}def`, K],
    ['two keys', `${key} and ${other}`, `${K} and ${K}`],
    ['escaped and plain', `${percent(key)},${other}`, `${K},${K}`],
    // not keys: kept as they are
    ['no key', '/v1/agents/0f8c-4b2e?limit=20', '/v1/agents/0f8c-4b2e?limit=20'],
    ['live alone', 'live_data olive_oil', 'live_data olive_oil'],
    ['_liv_e_', 'x_liv_e_y', 'x_liv_e_y'],
    ['_live- is not _live_', 'sak_live-abc', 'sak_live-abc'],
    ['bad escapes kept', 'a%zz%5%', 'a%zz%5%'],
    ['empty', '', ''],
  ]
  for (const [name, input, expected] of rows) {
    const output = maskForLog(input)
    t.equal(output, expected, `${name}: ${show(input)}`)
    const leaked = leaks(output)
    if (leaked !== undefined) t.fail(`${name}: leaks ${leaked}`)
  }
})

t.test('maskForLog: cut to maxLength first, then masked', async (t) => {
  const pad = (n: number): string => '-'.repeat(n)
  const rows: Array<[string, string, number | undefined, string]> = [
    ['short: unchanged', 'abc', undefined, 'abc'],
    ['exactly 256', 'a'.repeat(256), undefined, 'a'.repeat(256)],
    ['257: cut and marked', 'a'.repeat(257), undefined, `${'a'.repeat(256)}…`],
    ['a key that starts inside the limit is masked', `${pad(240)}${key}`, undefined, `${pad(240)}${K}…`],
    ['a cut that leaves _live_ is masked', `${pad(247)}${key}`, undefined, `${pad(247)}${K}…`],
    ['a cut inside the marker leaves no secret', `${pad(250)}${key}`, undefined, `${pad(250)}sak_li…`],
    ['a cut inside _live_ leaves no secret', `${pad(253)}${key}`, undefined, `${pad(253)}sak…`],
    ['a key past the limit is gone', `${pad(300)}${key}`, undefined, `${pad(256)}…`],
    ['other limit', `${key}${key}`, 30, `${K}…`],
    ['limit 0', 'abc', 0, '…'],
    ['no split surrogate pair', '😀'.repeat(200), 255, `${'😀'.repeat(127)}…`],
  ]
  for (const [name, input, maxLength, expected] of rows) t.equal(maskForLog(input, maxLength), expected, name)
})

t.test('maskForLog: linear on 1 MB of hostile input (outputs only)', async (t) => {
  const mb = 1 << 20
  const all = Number.POSITIVE_INFINITY
  const rows: Array<[string, string, number, string]> = [
    ['1 MB of a then _live_', `${'a'.repeat(mb)}_live_`, all, K],
    ['the same, default limit: cut first', `${'a'.repeat(mb)}_live_`, 256, `${'a'.repeat(256)}…`],
    ['1 MB of _liv', '_liv'.repeat(mb / 4), all, '_liv'.repeat(mb / 4)],
    ['1 MB of _live_ then more', `${'_live_'.repeat(mb / 6)}x`, all, K],
    ['1 MB of %5F', '%5F'.repeat(mb / 3), all, '%5F'.repeat(mb / 3)],
    ['1 MB of %25 then 5F', `${'%25'.repeat(mb / 3)}5F`, all, `${'%25'.repeat(mb / 3)}5F`],
    ['1 MB of %25 then an encoded marker', `${'%25'.repeat(mb / 3)}_live_`, all, K],
    ['1 MB of \\u005', '\\u005'.repeat(mb / 5), all, '\\u005'.repeat(mb / 5)],
    ['1 MB of short runs', 'a_ '.repeat(mb / 3), all, 'a_ '.repeat(mb / 3)],
    ['1 MB of short key-shaped runs', '_live_ '.repeat(mb / 7), all, `${K} `.repeat(mb / 7)],
  ]
  for (const [name, input, maxLength, expected] of rows) t.ok(maskForLog(input, maxLength) === expected, name)
})

t.test('maskQuery', async (t) => {
  const R = REDACTED
  const rows: Array<[string, string, string]> = [
    // name, query, masked
    ['api_key', 'api_key=abc', `api_key=${R}`],
    ['apikey', 'apikey=abc&limit=2', `apikey=${R}&limit=2`],
    ['key', 'limit=2&key=abc', `limit=2&key=${R}`],
    ['token', 'token=abc', `token=${R}`],
    ['access_token', 'access_token=abc', `access_token=${R}`],
    ['authorization', 'authorization=Bearer%20abc', `authorization=${R}`],
    ['any case', 'API_KEY=abc&Token=abc&ACCESS_TOKEN=abc&Authorization=abc&KEY=abc', `API_KEY=${R}&Token=${R}&ACCESS_TOKEN=${R}&Authorization=${R}&KEY=${R}`],
    ['dashes and camel case', 'api-key=a&x-api-key=b&apiKey=c&accessToken=d', `api-key=${R}&x-api-key=${R}&apiKey=${R}&accessToken=${R}`],
    ['escaped name', 'api%5Fkey=abc&%74oken=abc', `api%5Fkey=${R}&%74oken=${R}`],
    ['array name', 'token[]=abc', `token[]=${R}`],
    ['leading ?', '?token=abc&limit=20', `?token=${R}&limit=20`],
    ['; separates too', 'a=1;token=abc', `a=1;token=${R}`],
    ['= in the value', 'token=a=b', `token=${R}`],
    ['empty value kept', 'token=&limit=2', 'token=&limit=2'],
    ['no value kept', 'token&limit=2', 'token&limit=2'],
    ['other names kept', 'limit=20&cursor=abc&keys=1&monkey=2&tokens=3', 'limit=20&cursor=abc&keys=1&monkey=2&tokens=3'],
    ['a key under any name', `q=${key}`, `q=${K}`],
    ['an escaped key under any name', `q=sak%5Flive%5F${body}&limit=2`, `q=${K}&limit=2`],
    ['a key as a name', `${key}=1`, `${K}=1`],
    ['a key under a credential name', `api_key=${key}`, `api_key=${R}`],
    ['a key glued to ;x', `a=1;x${key}`, `a=1;${K}`],
    ['cut in a credential value', `limit=2&token=${'x'.repeat(300)}`, `limit=2&token=${R}…`],
    ['cut in a key', `q=${key}&`.repeat(10), `${`q=${K}&`.repeat(4)}q=${K}…`],
    ['empty', '', ''],
  ]
  for (const [name, query, expected] of rows) {
    const output = maskQuery(query)
    t.equal(output, expected, `${name}: ${show(query)}`)
    const leaked = leaks(output)
    if (leaked !== undefined) t.fail(`${name}: leaks ${leaked}`)
  }
  t.equal(maskQuery(`${'token=abc&'.repeat(100_000)}x=1`, Number.POSITIVE_INFINITY), `${`token=${R}&`.repeat(100_000)}x=1`, '1 MB of parameters')
  t.equal(maskQuery(`${'%25'.repeat(350_000)}=1`, Number.POSITIVE_INFINITY), `${'%25'.repeat(350_000)}=1`, 'a 1 MB name')
})
