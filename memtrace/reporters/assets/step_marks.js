
(function(){
'use strict';
var data=JSON.parse(document.getElementById('memtrace-data').textContent);
Array.prototype.forEach.call(document.querySelectorAll('figure.chart'),function(fig){
 var marks=fig.querySelectorAll('.step-mark');if(!marks.length)return;
 var g=data.charts[Number(fig.getAttribute('data-chart'))].geometry;
 function place(){var v=(fig.getAttribute('data-view')||'').split(',');if(v.length<2)return;
  var a=Number(v[0]),b=Number(v[1]);
  Array.prototype.forEach.call(marks,function(m){var t=Number(m.getAttribute('data-t'));
   var x=g.left+(t-a)/(b-a)*(g.right-g.left);
   m.setAttribute('visibility',t>=a&&t<=b?'visible':'hidden');
   var l=m.querySelector('line'),s=m.querySelector('text');
   l.setAttribute('x1',x.toFixed(1));l.setAttribute('x2',x.toFixed(1));s.setAttribute('x',(x+3).toFixed(1));});}
 new MutationObserver(place).observe(fig,{attributes:true,attributeFilter:['data-view']});place();});
})();
