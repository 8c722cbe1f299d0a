"""Everything written to OUT: where each file lives (`outdir`), the saved grades a run resumes from
(`state`), the CSVs (`outputs`), the class report (`report`), the feedback pages (`feedback`,
`alt_text`), what is made inert (`sanitise`), nbgrader's gradebook and hand grading
(`gradebook`, `handgrading`, `refresh`) and the platforms' exports (`export`).

May import: model, checks, course, intake.
"""
