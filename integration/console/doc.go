// Package console holds the web console's browser tests: headless
// Chromium, driven by chromedp, loads each view of the console that
// processor/serve mounts at / against running instances of the wordcount
// and pageviews examples on the embedded broker, and checks what a person
// sees. It has no code of its own: the tests are in console_test.go.
//
// The tests skip when Chromium is missing (Debian's package chromium) and
// fail then under CI=true. SLUICE_SCREENSHOTS=dir writes the four
// screenshots the README shows there (docs/ holds them), with the
// examples' own names and a minute and a half of live data on the
// overview; otherwise they go to a temporary directory.
package console
