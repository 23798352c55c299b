"""Engines: one per question the commands ask (materialise a series, merge a hunk 3-way, keep an
apply in progress, replay a resolution, attribute a break to upstream commits, exchange patches
with a commit range, run the regression suite). They use the model and the git door; they never
print: progress goes through a callback the command passes down."""
