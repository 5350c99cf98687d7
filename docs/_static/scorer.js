// The site's search scorer (conf.py's html_search_scorer): Sphinx's own weights, and one rule of ours. Sphinx scores a
// page by whether the word is in its text (5) or in any of its headings (15), so every page with the word in a section
// heading ties, and a guide whose title names it came eighth of 25 for "readout". A page whose own title holds every
// word searched for comes first, the earlier the word in the title the higher.
var Scorer = {
  score: result => {
    const [docname, title, anchor, descr, score] = result;
    const words = (new URLSearchParams(window.location.search).get('q') || '').toLowerCase().split(/\s+/).filter(w => w.length > 2);
    const own = (title || '').split(' > ')[0].toLowerCase();  // a section's result is titled 'page > section'
    if (!words.length || anchor || !words.every(w => own.includes(w))) return score;
    return score + 10 + 5 * (1 - Math.min(...words.map(w => own.indexOf(w))) / Math.max(own.length, 1));
  },
  objNameMatch: 11, objPartialMatch: 6, objPrio: {0: 15, 1: 5, 2: -5}, objPrioDefault: 0,
  title: 15, partialTitle: 7, term: 5, partialTerm: 2,
};
