{#- Formgrader's Manage Assignments for this course: where the graded class is, and nbgrader's own
    release path (generate, release, collect, feedback) hidden: this course releases with
    `student-release` and grades with `grade`. Written into the course directory by
    autograder/formgrade.py with the graded class filled in; extends nbgrader's page. -#}
{%- extends 'nbgrader_manage_assignments.tpl' -%}
{%- set graded_out = @@OUT@@ -%}
{%- block head -%}
{{ super() }}
<style>
thead th:nth-child(3), thead th:nth-child(5), thead th:nth-child(7), thead th:nth-child(8),
thead th:nth-child(9), thead th:nth-child(10), thead th:nth-child(11),
td.status, td.assign, td.release, td.collect, td.num-submissions, td.generate-feedback,
td.release-feedback, tfoot {display: none}
#autograder-where {font-size: 1.15em}
</style>
{%- endblock -%}
{%- block messages -%}
{%- if graded_out %}
<div class="alert alert-success" id="autograder-where" role="status">
<b>Hand grading:</b> the class graded in <code>{{ graded_out|e }}</code> is under
<a href="{{ base_url }}/formgrader/gradebook/@@ASSIGNMENT@@">Manual Grading → @@ASSIGNMENT@@</a>.
Then <code>python -m autograder refresh {{ graded_out|e }}</code> (or <code>export</code>) puts the
points and comments in grades.csv, the report and every student's feedback page.
</div>
{%- else %}
<div class="alert alert-warning" id="autograder-where" role="status">
<b>No graded class here yet:</b> grade one (<code>make grade OUT=...</code>, or
<code>python -m autograder grade SUBMISSIONS --out OUT</code>), then start <code>make lab OUT=...</code>:
its written answers are then under Manual Grading.
</div>
{%- endif %}
<p id="autograder-course-side">This course hands notebooks out with <code>make student-release</code>
and grades them with <code>make grade</code>: nbgrader's generate, release, collect and feedback
buttons do not apply to it and are not shown. The assignment's notebooks (Name) and the students'
version (Preview) are here.</p>
{%- endblock -%}
