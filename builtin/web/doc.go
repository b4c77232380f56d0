// Package web holds the built-in tools that reach the web: web_fetch,
// which downloads a page through the SSRF guard of package netguard and
// turns it into Markdown, and web_search, which asks the Brave Search API.
package web
