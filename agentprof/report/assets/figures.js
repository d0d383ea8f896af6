/* agentprof pages: a line never breaks inside a figure. The space between a number and its unit (12 %, 3.6 s,
   500 GiB, 40 tok/s) and between a duration's parts (2 h 36 m) becomes a no-break space: the terminal's rule
   (agentprof.safe_text). Shared by the report and diff pages, which insert their text through it. */
var agentprofWhole = (function () {
  "use strict";
  var DURATION_SPACE = /(\d [hmd]) (?=\d)/g;
  var UNIT_SPACE = /(\d) (?=(?:%|×|[hmsd]\b|ms\b|µs\b|ns\b|min\b|[KMGTP]i?B\b|[kMGT]?Wh?\b|[KMGT]B\/s\b|tok\/s\b))/g;
  return function (text) { return text.replace(DURATION_SPACE, "$1\u00a0").replace(UNIT_SPACE, "$1\u00a0"); };
})();
