// Screenshot a page of a running server in Debian's Chromium (never a downloaded browser):
//   node scripts/shot.mjs http://127.0.0.1:8101/training /tmp/training.png [width] [height]
import { chromium } from '@playwright/test'

const [url, out, width = '1440', height = '900'] = process.argv.slice(2)
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
})
const page = await browser.newPage({ viewport: { width: Number(width), height: Number(height) } })
page.on('console', (m) => { if (m.type() === 'error') console.error('console:', m.text()) })
await page.goto(url, { waitUntil: 'networkidle' })
await page.waitForTimeout(800)
await page.screenshot({ path: out, fullPage: true })
await browser.close()
console.log(out)
